"""cheat: lesson 03, attacks `softmax_correct`; expected: 0 points (the message says "Not a pure Triton kernel").

A plain Python helper holding the reduction, called from the kernel."""
from ..entry import L3, Entry

ENTRY = Entry("python_helper_in_the_softmax_kernel", L3, "softmax_correct", "a plain Python helper holding the "
              "reduction, called from the kernel", lambda t: {"softmax_code": "def row_max(v):  # not @triton.jit\n"
              "    return tl.max(v, axis=1)\n\n\n" + t["softmax_code"].replace(
                  "    z = x - tl.max(x, axis=1)[:, None]", "    z = x - row_max(x)[:, None]")},
              says="Not a pure Triton kernel")
