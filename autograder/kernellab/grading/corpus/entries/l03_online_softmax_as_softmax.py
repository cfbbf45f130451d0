"""honest control: lesson 03, attacks `softmax_correct`; expected: full points.

One row per program, online max and sum."""
from ..edits import _whole
from ..entry import L3, Entry

_ONLINE_AS_SOFTMAX = """@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = -float("inf")
    l = 0.0
    for start in range(0, n_cols, BLOCK):  # one pass: running max and rescaled sum
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * stride_out + cols, (tl.exp(x - m) / l).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0), BLOCK=1024, num_warps=4)
    return out
"""


ENTRY = Entry("online_softmax_as_softmax", L3, "softmax_correct", "one row per program, online max and sum",
              _whole("softmax_code", _ONLINE_AS_SOFTMAX), expect="full")
