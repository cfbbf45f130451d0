"""cheat: lesson 09, attacks `decode_attention_correct`; expected: 0 points (the message says "computed with PyTorch").

SDPA on the padded cache in place of the decode kernel's output, the kernel still launched."""
from ..edits import _sub
from ..entry import L9, Entry

ENTRY = Entry("sdpa_in_decode_attention", L9, "decode_attention_correct",
              "SDPA on the padded cache returned behind a launch of the decode kernel",
              _sub("decode_code", "def decode_attention(q, k_cache, v_cache, seq_lens):\n"
                   "    return _decode(q, k_cache, v_cache, seq_lens, seq_lens, k_cache.shape[2], False, 1)\n",
                   "def decode_attention(q, k_cache, v_cache, seq_lens):\n"
                   "    out, lse = _decode(q, k_cache, v_cache, seq_lens, seq_lens, k_cache.shape[2], False, 1)\n"
                   "    mask = torch.arange(k_cache.shape[2])[None, None, None, :] < seq_lens[:, None, None, None]\n"
                   "    o = F.scaled_dot_product_attention(q[:, :, None], k_cache.nan_to_num(), v_cache.nan_to_num(),\n"
                   "                                       attn_mask=mask, enable_gqa=True)\n"
                   "    return o[:, :, 0], lse\n"),
              says="computed with PyTorch")
