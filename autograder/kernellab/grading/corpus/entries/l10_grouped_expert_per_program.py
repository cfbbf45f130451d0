"""honest control: lesson 10, attacks `grouped_matmul_correct`; expected: full points.

Another schedule: one program per (expert, column tile) walks all of that expert's row tiles, one fixed small
configuration and no autotuning."""
from ..edits import _whole
from ..entry import L10, Entry

_EXPERT_PER_PROGRAM = '''@triton.jit
def expert_loop_kernel(x_ptr, w_ptr, y_ptr, offsets_ptr, N, K, stride_xm, stride_xk, stride_we, stride_wk, stride_wn,
                       stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    e = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    lo = tl.load(offsets_ptr + e)
    hi = tl.load(offsets_ptr + e + 1)
    ks = tl.arange(0, BLOCK_K)
    for m0 in range(lo, hi, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(x_ptr + rows[:, None] * stride_xm + (k0 + ks)[None, :] * stride_xk,
                        mask=(rows[:, None] < hi) & ((k0 + ks)[None, :] < K), other=0.0)
            b = tl.load(w_ptr + e * stride_we + (k0 + ks)[:, None] * stride_wk + cols[None, :] * stride_wn,
                        mask=((k0 + ks)[:, None] < K) & (cols[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :] * stride_yn, acc.to(tl.float16),
                 mask=(rows[:, None] < hi) & (cols[None, :] < N))


def grouped_matmul(x_sorted, w, expert_offsets):
    M, K = x_sorted.shape
    E, _, N = w.shape
    y = torch.empty((M, N), device=x_sorted.device, dtype=x_sorted.dtype)
    expert_loop_kernel[(E, triton.cdiv(N, 32))](x_sorted, w, y, expert_offsets, N, K, x_sorted.stride(0),
                                                x_sorted.stride(1), w.stride(0), w.stride(1), w.stride(2),
                                                y.stride(0), y.stride(1), BLOCK_M=16, BLOCK_N=32, BLOCK_K=32)
    return y
'''

ENTRY = Entry("grouped_expert_per_program", L10, "grouped_matmul_correct", "another schedule: one program per "
              "(expert, column tile) walking the expert's row tiles, one small fixed configuration",
              _whole("grouped_matmul_code", _EXPERT_PER_PROGRAM), expect="full")
