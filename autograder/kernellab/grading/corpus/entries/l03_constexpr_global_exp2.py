"""honest control: lesson 03, attacks `online_softmax_correct`; expected: full points.

A module-level tl.constexpr (log2 e) used in the kernel, exp2 instead of exp."""
from ..entry import L3, Entry

ENTRY = Entry("constexpr_global_exp2", L3, "online_softmax_correct", "a module-level tl.constexpr (log2 e) used in "
              "the kernel, exp2 instead of exp", lambda t: {"online_softmax_code": "LOG2E = tl.constexpr(1.4426950408889634)\n\n\n"
              + t["online_softmax_code"].replace("tl.store(out_row + cols, (tl.exp(x - m) / l)",
                                                 "tl.store(out_row + cols, (tl.math.exp2((x - m) * LOG2E) / l)")},
              expect="full")
