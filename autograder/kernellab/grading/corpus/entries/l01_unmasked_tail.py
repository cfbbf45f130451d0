"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "past the end").

Unmasked tail writing out of bounds."""
from ..edits import _sub
from ..entry import L1, Entry

def _nomask_store():
    return _sub("add_code", "tl.store(out_ptr + offsets, x + y, mask=mask)", "tl.store(out_ptr + offsets, x + y)")


ENTRY = Entry("unmasked_tail", L1, "add_correct", "unmasked tail writing out of bounds",
              _nomask_store(), says="past the end")
