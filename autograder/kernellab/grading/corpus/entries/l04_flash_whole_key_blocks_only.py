"""cheat: lesson 04, attacks `flash_attention_correct`; expected: 0 points (the message says "wrong").

Right only when N is a multiple of the key block (the partial block skipped)."""
from ..edits import _sub
from ..entry import L4, Entry

ENTRY = Entry("flash_whole_key_blocks_only", L4, "flash_attention_correct",
              "right only when N is a multiple of the key block (the partial block skipped)",
              _sub("flash_attention_code", "        end = N_CTX  # then the partial one, if any",
                   "        end = full  # the partial block is skipped"), says="wrong")
