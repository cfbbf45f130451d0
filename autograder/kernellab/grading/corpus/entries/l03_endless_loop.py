"""cheat: lesson 03, attacks `softmax_correct`; expected: 0 points (the message says "budget").

An infinite loop in the graded function."""
from ..edits import _sub
from ..entry import L3, Entry

ENTRY = Entry("endless_loop", L3, "softmax_correct", "an infinite loop in the graded function",
              _sub("softmax_code", "    n_rows, n_cols = x.shape\n", "    n_rows, n_cols = x.shape\n    while n_rows > 0:\n"
                   "        n_rows = n_rows + 1\n"), says="budget", budget_s=25.0)
