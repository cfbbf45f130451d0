# Lesson 05's backward in one kernel: dQ added into a float32 buffer with tl.atomic_add (relaxed), zeroed by the
# delta kernel and converted to fp16 after (scripts/bwd_atomic_ab.py; measured slower than the two kernels on an H100).
ATOMIC_CONFIGS = [triton.Config({"BLOCK_M": 32, "BLOCK_N": 64}, num_warps=4, num_stages=1)] + [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
    for bm, bn, w, s in [(32, 128, 8, 2), (64, 128, 8, 2), (64, 64, 4, 2), (64, 128, 8, 3), (32, 64, 4, 3),
                         (64, 64, 8, 3), (128, 128, 8, 2), (32, 128, 4, 2), (64, 128, 4, 2)]]


@triton.jit
def delta_zero_kernel(o_ptr, do_ptr, delta_ptr, dq32_ptr, stride_ob, stride_oh, stride_on, stride_db, stride_dh,
                      stride_dn, H, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta_i = dO_i . O_i, and zeros for the float32 dQ the atomics add into."""
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD_DIM)
    ok = rows[:, None] < N_CTX
    o = tl.load(o_ptr + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + d[None, :], mask=ok, other=0.0)
    do = tl.load(do_ptr + b * stride_db + h * stride_dh + rows[:, None] * stride_dn + d[None, :], mask=ok, other=0.0)
    tl.store(delta_ptr + bh * N_CTX + rows, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1), mask=rows < N_CTX)
    tl.store(dq32_ptr + bh.to(tl.int64) * N_CTX * HEAD_DIM + rows[:, None] * HEAD_DIM + d[None, :],
             tl.zeros([BLOCK_M, HEAD_DIM], tl.float32), mask=ok)


@triton.jit
def dq_convert_kernel(dq32_ptr, dq_ptr, total, sm_scale, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = i < total
    x = tl.load(dq32_ptr + i, mask=ok, other=0.0)
    tl.store(dq_ptr + i, (x * sm_scale).to(dq_ptr.dtype.element_ty), mask=ok)


@triton.jit
def fused_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, dq_ptrs, lse_ptr, delta_ptr, stride_qn, stride_dn, cols, lo, hi,
                 N_CTX, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
                 CAUSAL: tl.constexpr):
    m = tl.arange(0, BLOCK_M)
    for start in range(lo, hi, BLOCK_M):
        rows = start + m
        if MASKED:
            row_ok = rows < N_CTX
            qT = tl.load(qT_ptrs + start * stride_qn, mask=row_ok[None, :], other=0.0)
            lse = tl.load(lse_ptr + rows, mask=row_ok, other=0.0)
            delta = tl.load(delta_ptr + rows, mask=row_ok, other=0.0)
            do = tl.load(do_ptrs + start * stride_dn, mask=row_ok[:, None], other=0.0)
        else:
            qT = tl.load(qT_ptrs + start * stride_qn)
            lse = tl.load(lse_ptr + rows)
            delta = tl.load(delta_ptr + rows)
            do = tl.load(do_ptrs + start * stride_dn)
        pT = tl.math.exp2(tl.dot(k, qT) * qk_scale - lse[None, :] * 1.4426950408889634)
        if MASKED:
            keep = row_ok[None, :] & (cols[:, None] < N_CTX)
            if CAUSAL:
                keep = keep & (cols[:, None] <= rows[None, :])
            pT = tl.where(keep, pT, 0.0)
        dv += tl.dot(pT.to(do.dtype), do)
        dsT = (pT * (tl.dot(v, tl.trans(do)) - delta[None, :])).to(qT.dtype)
        dk += tl.dot(dsT, tl.trans(qT))
        dq = tl.dot(tl.trans(dsT), k)  # this key block's share of dQ for these rows
        if MASKED:
            tl.atomic_add(dq_ptrs + start * HEAD_DIM, dq, mask=row_ok[:, None], sem="relaxed")
        else:
            tl.atomic_add(dq_ptrs + start * HEAD_DIM, dq, sem="relaxed")
    return dk, dv


@kl.autotune(configs=ATOMIC_CONFIGS, key=["N_CTX", "HEAD_DIM", "CAUSAL"], restore_value=["dq32_ptr"])
@triton.jit
def fused_bwd_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, dq32_ptr,
                     stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                     stride_vb, stride_vh, stride_vn, stride_db, stride_dh, stride_dn,
                     H, N_CTX, sm_scale,
                     HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    cols = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    col_ok = cols[:, None] < N_CTX
    k = tl.load(k_ptr + b * stride_kb + h * stride_kh + cols[:, None] * stride_kn + d[None, :], mask=col_ok, other=0.0)
    v = tl.load(v_ptr + b * stride_vb + h * stride_vh + cols[:, None] * stride_vn + d[None, :], mask=col_ok, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    m = tl.arange(0, BLOCK_M)
    qT_ptrs = q_ptr + b * stride_qb + h * stride_qh + m[None, :] * stride_qn + d[:, None]
    do_ptrs = do_ptr + b * stride_db + h * stride_dh + m[:, None] * stride_dn + d[None, :]
    dq_ptrs = dq32_ptr + bh.to(tl.int64) * N_CTX * HEAD_DIM + m[:, None] * HEAD_DIM + d[None, :]
    qk_scale = sm_scale * 1.4426950408889634
    full = (N_CTX // BLOCK_M) * BLOCK_M
    if CAUSAL:
        lo = start_n * BLOCK_N
        diag = tl.minimum(lo + BLOCK_N, N_CTX)
    else:
        diag = 0
    stats = bh * N_CTX
    if CAUSAL:
        dk, dv = fused_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, dq_ptrs, lse_ptr + stats, delta_ptr + stats, stride_qn,
                              stride_dn, cols, lo, diag, N_CTX, qk_scale, HEAD_DIM, BLOCK_M, True, CAUSAL)
    dk, dv = fused_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, dq_ptrs, lse_ptr + stats, delta_ptr + stats, stride_qn,
                          stride_dn, cols, diag, full, N_CTX, qk_scale, HEAD_DIM, BLOCK_M, False, CAUSAL)
    dk, dv = fused_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, dq_ptrs, lse_ptr + stats, delta_ptr + stats, stride_qn,
                          stride_dn, cols, tl.maximum(diag, full), N_CTX, N_CTX, qk_scale, HEAD_DIM, BLOCK_M, True,
                          CAUSAL)
    dk *= sm_scale
    out = bh * N_CTX * HEAD_DIM + cols[:, None] * HEAD_DIM + d[None, :]
    tl.store(dk_ptr + out, dk.to(dk_ptr.dtype.element_ty), mask=col_ok)
    tl.store(dv_ptr + out, dv.to(dv_ptr.dtype.element_ty), mask=col_ok)


def flash_attention_backward(q, k, v, o, lse, do, causal):
    B, H, N, D = q.shape
    dq = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    dk = torch.empty_like(dq)
    dv = torch.empty_like(dq)
    dq32 = torch.empty((B, H, N, D), dtype=torch.float32, device=q.device)
    delta = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    delta_zero_kernel[(triton.cdiv(N, 64), B * H)](o, do, delta, dq32, *o.stride()[:3], *do.stride()[:3], H, N,
                                                   HEAD_DIM=D, BLOCK_M=64)
    args = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], H, N, 1.0 / math.sqrt(D))
    fused_bwd_kernel[lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), B * H)](
        q, k, v, do, lse, delta, dk, dv, dq32, *args, HEAD_DIM=D, CAUSAL=bool(causal))
    total = dq.numel()
    dq_convert_kernel[(triton.cdiv(total, 4096),)](dq32, dq, total, 1.0 / math.sqrt(D), BLOCK=4096)
    return dq, dk, dv
