"""honest control: lesson 02, attacks `matmul_correct`; expected: full points.

Split-K with atomic adds into an fp32 buffer."""
from ..edits import _SPLIT_K, _whole
from ..entry import L2, Entry

ENTRY = Entry("split_k_atomics", L2, "matmul_correct", "split-K with atomic adds into an fp32 buffer",
              _whole("matmul_code", _SPLIT_K), expect="full")
