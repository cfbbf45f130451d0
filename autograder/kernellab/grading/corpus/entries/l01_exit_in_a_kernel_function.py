"""cheat: lesson 01, attacks `fused_correct`; expected: 0 points (the message says "imports os").

Os._exit inside the graded function."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("exit_in_a_kernel_function", L1, "fused_correct", "os._exit inside the graded function",
              _sub("silu_gate_code", "    out = torch.empty_like(x)", "    import os\n    os._exit(3)\n    out = torch.empty_like(x)"),
              says="imports os")
