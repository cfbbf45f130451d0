"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "died").

An illegal memory access (sticky CUDA error)."""
from ..edits import _known
from ..entry import L1, Entry

ENTRY = Entry("illegal_memory_access", L1, "add_correct", "an illegal memory access (sticky CUDA error)",
              _known(L1, "illegal_address"), gpu=True, says="died")
