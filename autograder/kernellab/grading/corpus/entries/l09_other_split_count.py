"""honest control: lesson 09, attacks `decode_long_correct`; expected: full points.

Four times as many splits, of 128 keys at least (shorter pieces, more partials for the merge)."""
from ..edits import _sub
from ..entry import L9, Entry


def _more_splits(text):
    text = {**text, **_sub("decode_code", "    return max(1, min(want, triton.cdiv(max_len, MIN_SPLIT)))",
                           "    return max(1, min(4 * want, triton.cdiv(max_len, 128)))")(text)}
    return _sub("decode_code", "triton.cdiv(triton.cdiv(max_len, splits), MIN_SPLIT) * MIN_SPLIT",
                "triton.cdiv(triton.cdiv(max_len, splits), 128) * 128")(text)


ENTRY = Entry("other_split_count", L9, "decode_long_correct", "four times as many splits, of 128 keys at least",
              _more_splits, expect="full")
