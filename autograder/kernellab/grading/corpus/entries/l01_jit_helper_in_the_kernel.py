"""honest control: lesson 01, attacks `fused_correct`; expected: full points.

The kernel calls another @triton.jit function (silu)."""
from ..edits import _JIT_HELPER_SILU, _whole
from ..entry import L1, Entry

ENTRY = Entry("jit_helper_in_the_kernel", L1, "fused_correct", "the kernel calls another @triton.jit function (silu)",
              _whole("silu_gate_code", _JIT_HELPER_SILU), expect="full")
