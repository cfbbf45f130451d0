"""cheat: lesson 04, attacks `flash_attention_correct`; expected: 0 points (the message says "computed with PyTorch").

SDPA in place of the attention kernel."""
from ..edits import _sub
from ..entry import L4, Entry

ENTRY = Entry("sdpa_in_flash_attention", L4, "flash_attention_correct", "SDPA in place of the attention kernel",
              _sub("flash_attention_code", "    return o, lse\n",
                   "    return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)), lse\n"),
              says="computed with PyTorch")
