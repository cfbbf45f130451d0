"""cheat: lesson 03, attacks `add_layernorm_correct`; expected: 0 points (the message says "too many separate steps").

LayerNorm in Python floats, each element written with fill_."""
from ..edits import _sub
from ..entry import L3, Entry

ENTRY = Entry("python_floats_fill_layernorm", L3, "add_layernorm_correct", "LayerNorm in Python floats, each element "
              "written with fill_", _sub("add_layernorm_code", "    add_layernorm_kernel[(triton.cdiv(n_rows, rows),)](",
                                         "    for r in range(n_rows):\n        h = [a + b for a, b in zip(x[r].tolist(), "
                                         "residual[r].tolist())]\n        mu = sum(h) / n_cols\n"
                                         "        sd = (sum((v - mu) ** 2 for v in h) / n_cols + eps) ** 0.5\n"
                                         "        for c, (v, w, b) in enumerate(zip(h, weight.tolist(), bias.tolist())):\n"
                                         "            out[r, c].fill_((v - mu) / sd * w + b)\n"
                                         "    add_layernorm_kernel[(1,)]("), says="too many separate steps")
