"""honest control: lesson 03, attacks `softmax_correct`; expected: full points.

A .contiguous() copy of the input before the launch."""
from ..edits import _sub
from ..entry import L3, Entry

ENTRY = Entry("softmax_contiguous_copy", L3, "softmax_correct", "a .contiguous() copy of the input before the launch",
              _sub("softmax_code", "    n_rows, n_cols = x.shape\n    out = torch.empty_like(x)\n",
                   "    x = x.t().contiguous().t().contiguous()  # two copies: column-major, then row-major again\n"
                   "    n_rows, n_cols = x.shape\n    out = torch.empty_like(x)\n"), expect="full")
