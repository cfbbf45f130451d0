"""cheat: lesson 01, attacks `fused_correct`; expected: 0 points (the message says "exit").

Exit() inside the graded function."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("exit_builtin", L1, "fused_correct", "exit() inside the graded function",
              _sub("silu_gate_code", "    out = torch.empty_like(x)", "    exit(0)\n    out = torch.empty_like(x)"),
              says="exit")
