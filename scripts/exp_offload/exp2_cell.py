# Exponentials for the online softmax of lessons 04 and 08, prepended to a solution's attention cell by
# scripts/exp_offload_ab.py, which swaps the solution's `tl.math.exp2(...)` for `softmax_exp2(..., EXP_MODE)`.
# Why: Hopper's special-function unit (MUFU) does about 16 exponentials per clock per SM, a 128 x 128 block of
# scores needs 16384 of them (~1000 clocks) while its two products at D = 64 take ~1000 clocks of tensor-core
# time, so the exponentials can bound the loop. The FMA pipe does 128 fused multiply-adds per clock: a cubic
# for 2^f plus an exponent add costs ~9 of its instructions, so moving part of the exponentials there can
# shorten the softmax if the MUFU, not issue, is the bottleneck (measured on an H100: it is not, every mode was
# slower; assets/bench/exp_offload.md). The modes (the solutions themselves keep every exponential on the MUFU):
#   1 - half of them on the FMA pipe (each thread's pairs of neighbouring columns, split without data movement);
#   2 - all of them on the FMA pipe;
#   3 - a quarter of them on the FMA pipe.
# Not a mode: ex2.approx.f16x2 (two fp16 exponentials per instruction) compiles to two MUFU.EX2.F16 on sm_90.


@triton.jit
def exp2_fma(x):
    """2^x for x <= 0 without the MUFU: x = j + f with j = round(x), 2^f on [-1/2, 1/2] by a cubic (relative
    error 2.1e-4, under fp16's half ulp), then j added to the exponent bits. x below -125 gives 2^-125."""
    x = tl.maximum(x, -125.0)
    t = x + 12582912.0  # 1.5 * 2^23: the sum's low mantissa bits hold round(x), two's complement
    f = x - (t - 12582912.0)
    p = 0.05484806 * f + 0.24180646
    p = p * f + 0.69324815
    p = p * f + 0.99998868
    return (p.to(tl.int32, bitcast=True) + (t.to(tl.int32, bitcast=True) << 23)).to(tl.float32, bitcast=True)


@triton.jit
def _pairs(x):
    """Each thread's neighbouring columns apart: (even columns, odd columns), no data moved on an MMA layout."""
    return tl.split(tl.reshape(x, (x.shape[0], x.shape[1] // 2, 2)))


@triton.jit
def _unpairs(a, b):
    return tl.reshape(tl.join(a, b), (a.shape[0], a.shape[1] * 2))


@triton.jit
def _halves(x):
    """(left half of the columns, right half): on an MMA layout the top column bit is in each thread too."""
    return tl.split(tl.permute(tl.reshape(x, (x.shape[0], 2, x.shape[1] // 2)), (0, 2, 1)))


@triton.jit
def _unhalves(a, b):
    return tl.reshape(tl.permute(tl.join(a, b), (0, 2, 1)), (a.shape[0], a.shape[1] * 2))


@triton.jit
def softmax_exp2(x, MODE: tl.constexpr):
    if MODE == 1:
        a, b = _pairs(x)
        p = _unpairs(tl.math.exp2(a), exp2_fma(b))
    elif MODE == 2:
        p = exp2_fma(x)
    elif MODE == 3:
        a, b = _pairs(x)
        b1, b2 = _halves(b)
        p = _unpairs(tl.math.exp2(a), _unhalves(tl.math.exp2(b1), exp2_fma(b2)))
    return p
