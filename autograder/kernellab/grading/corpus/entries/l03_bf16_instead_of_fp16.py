"""cheat: lesson 03, attacks `add_layernorm_correct`; expected: 0 points (the message says "wrong").

Lower precision than asked (bf16 for fp16)."""
from ..edits import _sub
from ..entry import L3, Entry

ENTRY = Entry("bf16_instead_of_fp16", L3, "add_layernorm_correct", "lower precision than asked (bf16 for fp16)",
              _sub("add_layernorm_code", "y.to(out_ptr.dtype.element_ty)", "y.to(tl.bfloat16).to(out_ptr.dtype.element_ty)"),
              says="wrong")
