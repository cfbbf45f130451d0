"""cheat: lesson 04, attacks `flash_attention_memory`; expected: 0 points (the message says "besides its outputs").

The N x N scores in the tail of one big allocation whose head is returned."""
from ..edits import _scores_buffer
from ..entry import L4, Entry

ENTRY = Entry("scores_in_the_outputs_allocation", L4, "flash_attention_memory", "the N x N scores in the tail of one "
              "big allocation whose head is returned", _scores_buffer("tail"), says="besides its outputs")
