"""cheat: lesson 01, attacks `add_bandwidth`; expected: graded as the kernel it recorded.

Skip the work after the first calls (timed calls)."""
from ..edits import _ADD_HEAD, _DUMMY, _sub
from ..entry import L1, Entry

ENTRY = Entry("speed_lazy_after_warmup", L1, "add_bandwidth", "skip the work after the first calls (timed calls)",
              _sub("add_code", _ADD_HEAD, "CALLS = [0]\n\n" + _ADD_HEAD + "    CALLS[0] += 1\n"
                   "    if CALLS[0] > 2:\n" + _DUMMY.replace("    ", "        ", 1) + "        return out\n"), gpu=True,
              expect="kernel", max_value=1.1)
