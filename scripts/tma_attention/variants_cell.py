# Variants of lesson 08's tma_attention, run by scripts/tma_attention_ab.py after the solution's attention_code
# cell (whose helpers attend_key_block and masked_scores they reuse). The kinds:
#   one_tile - the solution until 2026-11-26: one BLOCK_M-row Q tile per program ("base" in that day's first runs;
#           since rewritten on the helpers below: the same arithmetic);
#   pipe  - the unmasked loop issues the next block's Q K^T before this block's softmax, so the tensor cores
#           have work queued while the softmax runs (FlashAttention-3's intra-warpgroup overlap, by hand);
#   halves - the solution's kernel: one program owns two half-height Q tiles with their own statistics and
#           alternates them, so one half's softmax sits between the other half's products (a ping-pong inside
#           one instruction stream);
#   plain_halves - the halves schedule with lesson 04's plain pointer loads, no descriptors;
#   every variant also takes its launch configuration (BLOCK_M, BLOCK_N, warps, stages) and warp_specialize.


@triton.jit
def _key_range(q0, N_CTX, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Keys [0, full) need no mask; [full, end) do (the diagonal, or the partial last block)."""
    if CAUSAL:
        full = q0
        end = tl.minimum(q0 + BLOCK_M, N_CTX)
    else:
        full = (N_CTX // BLOCK_N) * BLOCK_N
        end = N_CTX
    return full, end


@triton.jit
def _fresh_stats(ROWS: tl.constexpr, HEAD_DIM: tl.constexpr):
    return (tl.full([ROWS], -float("inf"), tl.float32), tl.zeros([ROWS], tl.float32),
            tl.zeros([ROWS, HEAD_DIM], tl.float32))


@triton.jit
def _tile_setup(q_ptr, k_ptr, v_ptr, o_ptr, B, H, N_CTX, sqb, sqh, sqn, skb, skh, skn, svb, svh, svn,
                sob, soh, son, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, Q_ROWS: tl.constexpr):
    start_m = tl.program_id(0)
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - start_m
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    q_desc = tl.make_tensor_descriptor(q_ptr, shape=[B, H, N_CTX, HEAD_DIM], strides=[sqb, sqh, sqn, 1],
                                       block_shape=[1, 1, Q_ROWS, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr, shape=[B, H, N_CTX, HEAD_DIM], strides=[skb, skh, skn, 1],
                                       block_shape=[1, 1, BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr, shape=[B, H, N_CTX, HEAD_DIM], strides=[svb, svh, svn, 1],
                                       block_shape=[1, 1, BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(o_ptr, shape=[B, H, N_CTX, HEAD_DIM], strides=[sob, soh, son, 1],
                                       block_shape=[1, 1, Q_ROWS, HEAD_DIM])
    q0 = start_m * BLOCK_M
    full, end = _key_range(q0, N_CTX, CAUSAL, BLOCK_M, BLOCK_N)
    return b, h, bh, q0, full, end, q_desc, k_desc, v_desc, o_desc


@triton.jit
def _finish(acc, m_i, l_i, o_desc, o_ptr, lse_ptr, b, h, bh, q0, N_CTX, ROWS: tl.constexpr, HEAD_DIM: tl.constexpr):
    o = acc / l_i[:, None]
    o_desc.store([b, h, q0, 0], o.to(o_ptr.dtype.element_ty).reshape(1, 1, ROWS, HEAD_DIM))
    rows = q0 + tl.arange(0, ROWS)
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
    tl.store(lse_ptr + bh * N_CTX + rows, lse, mask=rows < N_CTX)


@triton.jit
def tma_attention_one_tile_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, B, H, N_CTX, qk_scale,
                                  sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
                                  HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                                  BLOCK_N: tl.constexpr, WS: tl.constexpr, PIPE: tl.constexpr):
    """One BLOCK_M-row tile per program: the solution before the halves (PIPE off, WS on), or with the next
    block's Q K^T issued before this block's softmax (PIPE)."""
    b, h, bh, q0, full, end, q_desc, k_desc, v_desc, o_desc = _tile_setup(
        q_ptr, k_ptr, v_ptr, o_ptr, B, H, N_CTX, sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
        HEAD_DIM, CAUSAL, BLOCK_M, BLOCK_N, BLOCK_M)
    q = q_desc.load([b, h, q0, 0]).reshape(BLOCK_M, HEAD_DIM)
    rows = q0 + tl.arange(0, BLOCK_M)
    m_i, l_i, acc = _fresh_stats(BLOCK_M, HEAD_DIM)
    if PIPE:
        if full > 0:
            s = tl.dot(q, k_desc.load([b, h, 0, 0]).reshape(BLOCK_N, HEAD_DIM).T)
            for start in tl.range(BLOCK_N, full, BLOCK_N, warp_specialize=WS):
                s_next = tl.dot(q, k_desc.load([b, h, start, 0]).reshape(BLOCK_N, HEAD_DIM).T)
                v = v_desc.load([b, h, start - BLOCK_N, 0]).reshape(BLOCK_N, HEAD_DIM)
                m_i, l_i, acc = attend_key_block(s, v, m_i, l_i, acc, qk_scale)
                s = s_next
            v = v_desc.load([b, h, full - BLOCK_N, 0]).reshape(BLOCK_N, HEAD_DIM)
            m_i, l_i, acc = attend_key_block(s, v, m_i, l_i, acc, qk_scale)
    else:
        for start in tl.range(0, full, BLOCK_N, warp_specialize=WS):
            s = tl.dot(q, k_desc.load([b, h, start, 0]).reshape(BLOCK_N, HEAD_DIM).T)
            v = v_desc.load([b, h, start, 0]).reshape(BLOCK_N, HEAD_DIM)
            m_i, l_i, acc = attend_key_block(s, v, m_i, l_i, acc, qk_scale)
    for start in range(full, end, BLOCK_N):
        s = tl.dot(q, k_desc.load([b, h, start, 0]).reshape(BLOCK_N, HEAD_DIM).T)
        s = masked_scores(s, start, rows, N_CTX, CAUSAL, BLOCK_N)
        v = v_desc.load([b, h, start, 0]).reshape(BLOCK_N, HEAD_DIM)
        m_i, l_i, acc = attend_key_block(s, v, m_i, l_i, acc, qk_scale)
    _finish(acc, m_i, l_i, o_desc, o_ptr, lse_ptr, b, h, bh, q0, N_CTX, BLOCK_M, HEAD_DIM)


@triton.jit
def _pointer_blocks(qa, qb, m_a, l_a, acc_a, m_b, l_b, acc_b, k_ptrs, v_ptrs, stride_kn, stride_vn, rows_a, rows_b,
                    lo, hi, N_CTX, qk_scale, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        if MASKED:
            kT = tl.load(k_ptrs + start * stride_kn, mask=cols[None, :] < N_CTX, other=0.0)
            v = tl.load(v_ptrs + start * stride_vn, mask=cols[:, None] < N_CTX, other=0.0)
            s_a = masked_scores(tl.dot(qa, kT), start, rows_a, N_CTX, CAUSAL, BLOCK_N)
            s_b = masked_scores(tl.dot(qb, kT), start, rows_b, N_CTX, CAUSAL, BLOCK_N)
        else:
            kT = tl.load(k_ptrs + start * stride_kn)
            v = tl.load(v_ptrs + start * stride_vn)
            s_a = tl.dot(qa, kT)
            s_b = tl.dot(qb, kT)
        m_a, l_a, acc_a = attend_key_block(s_a, v, m_a, l_a, acc_a, qk_scale)
        m_b, l_b, acc_b = attend_key_block(s_b, v, m_b, l_b, acc_b, qk_scale)
    return m_a, l_a, acc_a, m_b, l_b, acc_b


@triton.jit
def pointer_halves_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, B, H, N_CTX, qk_scale,
                          sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
                          HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr):
    """The halves schedule with lesson 04's plain loads (no TMA): what it gives without Hopper's copy engine."""
    HALF: tl.constexpr = BLOCK_M // 2
    start_m = tl.program_id(0)
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - start_m
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    q0 = start_m * BLOCK_M
    rows_a = q0 + tl.arange(0, HALF)
    rows_b = rows_a + HALF
    d = tl.arange(0, HEAD_DIM)
    q_base = q_ptr + b * sqb + h * sqh + d[None, :]
    qa = tl.load(q_base + rows_a[:, None] * sqn, mask=rows_a[:, None] < N_CTX, other=0.0)
    qb = tl.load(q_base + rows_b[:, None] * sqn, mask=rows_b[:, None] < N_CTX, other=0.0)
    n = tl.arange(0, BLOCK_N)
    k_ptrs = k_ptr + b * skb + h * skh + n[None, :] * skn + d[:, None]
    v_ptrs = v_ptr + b * svb + h * svh + n[:, None] * svn + d[None, :]
    m_a, l_a, acc_a = _fresh_stats(HALF, HEAD_DIM)
    m_b, l_b, acc_b = _fresh_stats(HALF, HEAD_DIM)
    full, end = _key_range(q0, N_CTX, CAUSAL, BLOCK_M, BLOCK_N)
    m_a, l_a, acc_a, m_b, l_b, acc_b = _pointer_blocks(qa, qb, m_a, l_a, acc_a, m_b, l_b, acc_b, k_ptrs, v_ptrs,
                                                       skn, svn, rows_a, rows_b, 0, full, N_CTX, qk_scale,
                                                       BLOCK_N, False, CAUSAL)
    m_a, l_a, acc_a, m_b, l_b, acc_b = _pointer_blocks(qa, qb, m_a, l_a, acc_a, m_b, l_b, acc_b, k_ptrs, v_ptrs,
                                                       skn, svn, rows_a, rows_b, full, end, N_CTX, qk_scale,
                                                       BLOCK_N, True, CAUSAL)
    o_base = o_ptr + b * sob + h * soh + d[None, :]
    tl.store(o_base + rows_a[:, None] * son, (acc_a / l_a[:, None]).to(o_ptr.dtype.element_ty),
             mask=rows_a[:, None] < N_CTX)
    tl.store(o_base + rows_b[:, None] * son, (acc_b / l_b[:, None]).to(o_ptr.dtype.element_ty),
             mask=rows_b[:, None] < N_CTX)
    tl.store(lse_ptr + bh * N_CTX + rows_a, (m_a + tl.math.log2(l_a)) * 0.6931471805599453, mask=rows_a < N_CTX)
    tl.store(lse_ptr + bh * N_CTX + rows_b, (m_b + tl.math.log2(l_b)) * 0.6931471805599453, mask=rows_b < N_CTX)




def attention_variant(kind, BLOCK_M, BLOCK_N, warps, stages, ws=True):
    """tma_attention(q, k, v, causal) with another kernel (one_tile, pipe, halves, plain_halves) or launch configuration."""
    def run(q, k, v, causal):
        B, H, N, D = q.shape
        o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
        lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
        grid = (triton.cdiv(N, BLOCK_M), B * H)
        args = (q, k, v, o, lse, B, H, N, 1.4426950408889634 / math.sqrt(D),
                *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3])
        kw = dict(HEAD_DIM=D, CAUSAL=bool(causal), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=warps,
                  num_stages=stages)
        if kind in ("one_tile", "pipe"):
            tma_attention_one_tile_kernel[grid](*args, WS=ws, PIPE=kind == "pipe", **kw)
        elif kind == "halves":
            tma_attention_kernel[grid](*args, WARP_SPECIALIZE=ws, **kw)
        else:
            pointer_halves_kernel[grid](*args, **kw)
        return o, lse
    return run
