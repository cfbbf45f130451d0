"""cheat: lesson 01, attacks `answers_add`; expected: 0 points (the message says "not right").

NaN / negative / huge partial-credit numbers."""
from ..edits import _whole
from ..entry import L1, Entry

ENTRY = Entry("nan_negative_huge_answers", L1, "answers_add", "NaN / negative / huge partial-credit numbers",
              _whole("answers_add_code", "ADD_BYTES = float('nan')\nADD_FLOPS = -1.0\nADD_INTENSITY = 1e308 * 10\n"
                     "ADD_BOUND = -1e300\n"), says="not right")
