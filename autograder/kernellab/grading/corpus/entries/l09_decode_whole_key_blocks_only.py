"""cheat: lesson 09, attacks `decode_attention_correct`; expected: 0 points (the message says "wrong").

Right only when a sequence's length is a multiple of the key block: the partial last block is skipped."""
from ..edits import _sub
from ..entry import L9, Entry

ENTRY = Entry("decode_whole_key_blocks_only", L9, "decode_attention_correct",
              "right only for lengths that are multiples of the key block (the partial block skipped)",
              _sub("decode_code", "    for start in range(lo, hi, BLOCK_N):\n",
                   "    for start in range(lo, lo + ((hi - lo) // BLOCK_N) * BLOCK_N, BLOCK_N):  # whole blocks only\n"),
              says="wrong")
