"""cheat: lesson 01, attacks `fused_correct`; expected: 0 points.

A store far out of bounds (a crash or an illegal memory access)."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("wild_store", L1, "fused_correct", "a store far out of bounds (a crash or an illegal memory access)",
              _sub("silu_gate_code", "tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)",
                   "tl.store(out_ptr + offsets * 1000003 + 7919 * 1000003, out.to(out_ptr.dtype.element_ty))"),
              says="")
