"""honest control: lesson 01, attacks `add_correct`; expected: full points.

The grid and the kernel chosen from the shape (one block for small n), triton.cdiv / next_power_of_2,
torch.empty(..., device=x.device)."""
from ..edits import _whole
from ..entry import L1, Entry

_SMALL_AND_LARGE_ADD = """@triton.jit
def add_one_block(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add(x, y):
    n = x.numel()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if n <= 2048:  # small: one program covering the whole array
        add_one_block[(1,)](x, y, out, n, BLOCK=max(16, triton.next_power_of_2(n)))
    else:
        block = 4096 if n >= (1 << 20) else 1024
        add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    return out
"""


ENTRY = Entry("small_and_large_kernels", L1, "add_correct", "the grid and the kernel chosen from the shape (one block for "
              "small n), triton.cdiv / next_power_of_2, torch.empty(..., device=x.device)",
              _whole("add_code", _SMALL_AND_LARGE_ADD), expect="full")
