"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "NaN").

Right for the first calls, then an unwritten buffer."""
from ..edits import _ADD_HEAD, _DUMMY, _sub
from ..entry import L1, Entry

ENTRY = Entry("cache_on_call_count", L1, "add_correct", "right for the first calls, then an unwritten buffer",
              _sub("add_code", _ADD_HEAD, "CALLS = [0]\n\n" + _ADD_HEAD + "    CALLS[0] += 1\n"
                   "    if CALLS[0] > 3:\n" + _DUMMY.replace("    ", "        ", 1) + "        return out\n"), says="NaN")
