"""cheat: lesson 04, attacks `flash_attention_memory`; expected: 0 points (the message says "neither an input nor allocated").

An N x N buffer allocated when the cell runs, before the graded call (the memory check counts allocations
inside it)."""
from ..edits import _scores_buffer
from ..entry import L4, Entry

ENTRY = Entry("scores_made_before_the_call", L4, "flash_attention_memory", "an N x N buffer allocated when the cell "
              "runs, before the graded call (the memory check counts allocations inside it)", _scores_buffer("cell"),
              says="neither an input nor allocated")
