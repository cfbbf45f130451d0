"""cheat: lesson 01, attacks `fused_correct`; expected: 0 points (the message says "Not a pure Triton kernel").

A plain Python function called from the kernel body (runs on the host in the interpreter)."""
from ..entry import L1, Entry

ENTRY = Entry("python_helper_in_the_kernel", L1, "fused_correct", "a plain Python function called from the kernel body "
              "(runs on the host in the interpreter)", lambda t: {
                  "silu_gate_code": "def silu(v):  # not @triton.jit: Python on the host in the interpreter\n"
                                    "    return v * tl.sigmoid(v)\n\n\n" + t["silu_gate_code"].replace(
                                        "    out = x * tl.sigmoid(x) * y + x\n", "    out = silu(x) * y + x\n")},
              says="Not a pure Triton kernel")
