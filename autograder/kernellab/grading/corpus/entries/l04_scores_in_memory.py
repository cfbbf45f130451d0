"""cheat: lesson 04, attacks `flash_attention_memory`; expected: 0 points (the message says "memory").

An N x N scores buffer (the memory FlashAttention saves)."""
from ..edits import _known
from ..entry import L4, Entry

ENTRY = Entry("scores_in_memory", L4, "flash_attention_memory", "an N x N scores buffer (the memory FlashAttention saves)",
              _known(L4, "scores_scratch"), says="memory")
