"""honest control: lesson 01, attacks `add_correct`; expected: full points.

Odd lengths: unmasked whole blocks, then one masked tail launch."""
from ..edits import _whole
from ..entry import L1, Entry

_TAIL_LAUNCH_ADD = """@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, start, n, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    offsets = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASKED:  # only the tail launch pays for the mask
        keep = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=keep) + tl.load(y_ptr + offsets, mask=keep),
                 mask=keep)
    else:
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    whole = n // BLOCK
    if whole:
        add_kernel[(whole,)](x, y, out, 0, n, BLOCK=BLOCK, MASKED=False)
    if n % BLOCK:
        add_kernel[(1,)](x, y, out, whole * BLOCK, n, BLOCK=BLOCK, MASKED=True)
    return out
"""


ENTRY = Entry("tail_in_its_own_launch", L1, "add_correct", "odd lengths: unmasked whole blocks, then one masked tail launch",
              _whole("add_code", _TAIL_LAUNCH_ADD), expect="full")
