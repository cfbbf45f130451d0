"""honest control: lesson 01, attacks `add_correct`; expected: full points.

A fixed grid looping over the array."""
from ..edits import _whole
from ..entry import L1, Entry

_GRID_STRIDE_ADD = """@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # a fixed number of programs, each walking the array in strides of the whole grid
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        keep = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=keep) + tl.load(y_ptr + offsets, mask=keep),
                 mask=keep)


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(min(triton.cdiv(n, 2048), 264),)](x, y, out, n, BLOCK=2048, num_warps=4)
    return out
"""


ENTRY = Entry("grid_stride_add", L1, "add_correct", "a fixed grid looping over the array", _whole("add_code", _GRID_STRIDE_ADD),
              expect="full")
