"""honest control: lesson 01, attacks `add_correct`; expected: full points.

Tl.where on the offsets instead of load/store masks, a module-level tl.constexpr global in the kernel."""
from ..edits import _whole
from ..entry import L1, Entry

_WHERE_ADD = """SPAN: tl.constexpr = tl.constexpr(1024)  # a module-level constexpr the kernel reads


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n):
    offsets = tl.program_id(0) * SPAN + tl.arange(0, SPAN)
    inside = offsets < n
    safe = tl.where(inside, offsets, 0)  # every lane loads a valid address: no load masks
    total = tl.load(x_ptr + safe) + tl.load(y_ptr + safe)
    tl.store(out_ptr + tl.where(inside, offsets, n - 1), tl.where(inside, total, tl.load(x_ptr + n - 1) +
             tl.load(y_ptr + n - 1)))  # lanes past the end rewrite the last element with its own value


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n)
    return out
"""


ENTRY = Entry("where_instead_of_masks", L1, "add_correct", "tl.where on the offsets instead of load/store masks, "
              "a module-level tl.constexpr global in the kernel", _whole("add_code", _WHERE_ADD), expect="full")
