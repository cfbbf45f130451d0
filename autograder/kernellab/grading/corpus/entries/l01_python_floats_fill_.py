"""cheat: lesson 01, attacks `fused_correct`; expected: 0 points (the message says "too many separate steps").

Python floats written back element by element with fill_."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("python_floats_fill_", L1, "fused_correct", "Python floats written back element by element with fill_",
              _sub("silu_gate_code", "    silu_gate_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=8)\n",
                   "    silu_gate_kernel[(1,)](x, y, out, 1, BLOCK=16)  # a token launch\n"
                   "    flat, xs, ys = out.view(-1), x.view(-1).tolist(), y.view(-1).tolist()\n"
                   "    for i in range(n):\n        a = xs[i]\n"
                   "        flat[i].fill_(a / (1.0 + math.exp(-a)) * ys[i] + a)\n"), says="too many separate steps")
