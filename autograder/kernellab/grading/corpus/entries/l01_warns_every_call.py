"""honest control: lesson 01, attacks `fused_correct`; expected: full points.

Prints a warning on every call."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("warns_every_call", L1, "fused_correct", "prints a warning on every call",
              _sub("silu_gate_code", "    out = torch.empty_like(x)", "    import warnings\n"
                   "    warnings.warn('silu_gate: this kernel is not tuned yet')\n    print('silu_gate called')\n"
                   "    out = torch.empty_like(x)"), expect="full")
