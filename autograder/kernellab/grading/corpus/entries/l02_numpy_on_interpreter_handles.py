"""cheat: lesson 02, attacks `matmul_correct`; expected: 0 points (the message says "values do not have").

The product in numpy on the interpreter's own arrays (a tensor's .handle.data), between a tl.load and a
tl.store, no tl.dot."""
from ..edits import _whole
from ..entry import L2, Entry

_HANDLE_NUMPY = '''@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    acc.handle.data[:, :] = a.handle.data.astype("float64") @ b.handle.data.astype("float64")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    mm_kernel[(1,)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                    BM=triton.next_power_of_2(M), BN=triton.next_power_of_2(N), BK=triton.next_power_of_2(K))
    return c
'''


ENTRY = Entry("numpy_on_interpreter_handles", L2, "matmul_correct", "the product in numpy on the interpreter's own "
              "arrays (a tensor's .handle.data), between a tl.load and a tl.store, no tl.dot",
              _whole("matmul_code", _HANDLE_NUMPY), says="values do not have")
