"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "not allocated during the call").

Cached result keyed on shape and dtype (replayed on a repeat)."""
from ..edits import _cache_edit
from ..entry import L1, Entry

ENTRY = Entry("cache_on_shape", L1, "add_correct", "cached result keyed on shape and dtype (replayed on a repeat)",
              _cache_edit("x.shape, x.dtype"), says="not allocated during the call")
