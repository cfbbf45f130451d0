"""cheat: lesson 03, attacks `softmax_correct`; expected: 0 points (the message says "wrong").

Right only on power-of-two widths."""
from ..edits import _sub
from ..entry import L3, Entry

ENTRY = Entry("power_of_two_rows_only", L3, "softmax_correct", "right only on power-of-two widths",
              _sub("softmax_code", "block_c = triton.next_power_of_2(n_cols)", "block_c = n_cols if n_cols & (n_cols - 1) == 0 "
                   "else triton.next_power_of_2(n_cols) // 2"), says="wrong")
