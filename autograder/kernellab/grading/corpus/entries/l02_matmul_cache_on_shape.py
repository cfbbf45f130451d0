"""cheat: lesson 02, attacks `matmul_correct`; expected: 0 points (the message says "launched no Triton kernel").

Matmul result cached on the operands' shapes."""
from ..edits import _sub
from ..entry import L2, Entry

ENTRY = Entry("matmul_cache_on_shape", L2, "matmul_correct", "matmul result cached on the operands' shapes",
              _sub("matmul_code", "def matmul(a, b):\n    return _launch(a, b, None)\n",
                   "CACHE = {}\n\n\ndef matmul(a, b):\n    key = (tuple(a.shape), tuple(b.shape), a.dtype)\n"
                   "    if key not in CACHE:\n        CACHE[key] = _launch(a, b, None)\n    return CACHE[key]\n"),
              says="launched no Triton kernel")
