"""cheat: lesson 03, attacks `online_softmax_reads`; expected: 0 points (the message says "read").

The first pass reads with tl.atomic_add(ptr, 0), which the load counter does not see."""
from ..edits import _THREE_READS_ON_A_CLONE, _whole
from ..entry import L3, Entry

_ATOMIC_READS = _THREE_READS_ON_A_CLONE.replace(
    "    for start in range(0, n_cols, BLOCK):  # pass 1: the max\n        cols = start + tl.arange(0, BLOCK)\n"
    "        m = tl.maximum(m, tl.max(tl.load(x_row + cols, mask=cols < n_cols, other=-float(\"inf\")).to(tl.float32), 0))\n",
    "    for start in range(0, n_cols, BLOCK):  # pass 1: the max, read by adding zero (not a load)\n"
    "        cols = start + tl.arange(0, BLOCK)\n"
    "        seen = tl.atomic_add(x_row + cols, tl.zeros([BLOCK], x_ptr.dtype.element_ty), mask=cols < n_cols)\n"
    "        m = tl.maximum(m, tl.max(tl.where(cols < n_cols, seen.to(tl.float32), -float(\"inf\")), 0))\n").replace(
    "    copy = x.clone()  # the counter watches x; the three passes read the copy\n"
    "    online_softmax_kernel[(n_rows,)](out, copy, n_cols, copy.stride(0), out.stride(0), BLOCK=1024)\n",
    "    online_softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0), BLOCK=1024)\n")


ENTRY = Entry("atomic_add_zero_as_loads", L3, "online_softmax_reads", "the first pass reads with tl.atomic_add(ptr, 0), "
              "which the load counter does not see", _whole("online_softmax_code", _ATOMIC_READS), says="read")
