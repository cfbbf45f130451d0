"""honest control: lesson 09, attacks `paged_decode_correct`; expected: full points.

A fixed key block of 32 and two warps instead of autotuning."""
from ..edits import _sub
from ..entry import L9, Entry


def _fixed_blocks(text):
    text = {**text, **_sub("decode_code", '@kl.autotune(configs=DECODE_CONFIGS, key=["split_len", "HEAD_DIM", "GROUP", '
                           '"PAGED"])\n', "")(text)}
    return _sub("decode_code", "BLOCK_G=max(16, triton.next_power_of_2(group)))",
                "BLOCK_G=max(16, triton.next_power_of_2(group)), BLOCK_N=32, num_warps=2)")(text)


ENTRY = Entry("other_decode_blocks", L9, "paged_decode_correct", "fixed BLOCK_N=32, two warps instead of autotuning",
              _fixed_blocks, expect="full")
