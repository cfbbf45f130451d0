"""honest control: lesson 01, attacks `add_bandwidth`; expected: the speed points it earns.

BLOCK=128, one warp: slower, timed honestly."""
from ..edits import _slow_add
from ..entry import L1, Entry

ENTRY = Entry("slow_add_speed", L1, "add_bandwidth", "BLOCK=128, one warp: slower, timed honestly",
              _slow_add, expect="earned", gpu=True)
