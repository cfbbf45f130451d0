"""cheat: lesson 09, attacks `decode_attention_correct`; expected: 0 points (the message says "launched no Triton kernel").

The decode result cached across calls, keyed on the inputs' shapes."""
from ..edits import _sub
from ..entry import L9, Entry

ENTRY = Entry("decode_cache_on_shape", L9, "decode_attention_correct", "decode result cached on the inputs' shapes",
              _sub("decode_code", "def decode_attention(q, k_cache, v_cache, seq_lens):\n"
                   "    return _decode(q, k_cache, v_cache, seq_lens, seq_lens, k_cache.shape[2], False, 1)\n",
                   "CACHE = {}\n\n\ndef decode_attention(q, k_cache, v_cache, seq_lens):\n"
                   "    key = (tuple(q.shape), tuple(k_cache.shape))\n    if key not in CACHE:\n"
                   "        CACHE[key] = _decode(q, k_cache, v_cache, seq_lens, seq_lens, k_cache.shape[2], False, 1)\n"
                   "    return CACHE[key]\n"),
              says="launched no Triton kernel")
