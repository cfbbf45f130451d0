"""honest control: lesson 01, attacks `add_correct`; expected: full points.

Triton.autotune (not kl.autotune) over three block sizes."""
from ..edits import _AUTOTUNED_ADD, _whole
from ..entry import L1, Entry

_STOCK_AUTOTUNED_ADD = _AUTOTUNED_ADD.replace("@kl.autotune(", "@triton.autotune(").replace(
    "             key=", "                 key=")  # what the Triton tutorials write: benchmarked on a GPU


ENTRY = Entry("stock_autotuned_add", L1, "add_correct", "triton.autotune (not kl.autotune) over three block sizes",
              _whole("add_code", _STOCK_AUTOTUNED_ADD), expect="full")
