"""honest control: lesson 01, attacks `add_correct`; expected: full points.

BLOCK=128, one warp."""
from ..edits import _slow_add
from ..entry import L1, Entry

ENTRY = Entry("small_blocks_one_warp", L1, "add_correct", "BLOCK=128, one warp", _slow_add, expect="full")
