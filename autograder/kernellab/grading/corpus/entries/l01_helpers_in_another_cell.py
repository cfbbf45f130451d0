"""honest control: lesson 01, attacks `fused_correct`; expected: full points.

A block-size global and a plain Python grid function defined in another cell (the add cell)."""
from ..edits import _JIT_HELPER_SILU
from ..entry import L1, Entry

_HELPERS_CELL = "\n\nGATE_BLOCK = 1024  # used by the next cell\n\n\ndef gate_grid(n):\n    return (triton.cdiv(n, GATE_BLOCK),)\n"


_GATE_WITH_HELPERS = _JIT_HELPER_SILU.replace("silu_gate_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)",
                                              "silu_gate_kernel[gate_grid(n)](x, y, out, n, BLOCK=GATE_BLOCK)")


ENTRY = Entry("helpers_in_another_cell", L1, "fused_correct", "a block-size global and a plain Python grid function "
              "defined in another cell (the add cell)", lambda t: {"add_code": t["add_code"] + _HELPERS_CELL,
                                                                   "silu_gate_code": _GATE_WITH_HELPERS}, expect="full")
