"""An attention forward written in Gluon (Triton 3.6's lower-level language) with FlashAttention-3's Hopper
schedule spelled out by hand: one loader warp streams K and V through a ring of shared-memory stages with TMA, and
two consumer warpgroups each own half of a 128-row query tile, issue their own wgmma products and run their own
softmax, so one warpgroup's exponentials overlap the other's tensor-core work. With ``PIPE`` a consumer also
issues the next key block's Q K^T before this block's softmax (the intra-warpgroup overlap). With ``PERSISTENT``
one program per SM walks the tiles, and the loader fetches the next tile's Q, K and V while the consumers are still
writing this tile's output.

An experiment for issue 20 (`attn_fwd_vs_cudnn`), not course material: the course teaches Triton, and this asks
whether the schedule Triton 3.6's compiler does not produce from lesson 08's kernel closes the gap to cuDNN.
GPU only (sm_90): Gluon has no interpreter. Sequence lengths must be multiples of 128.
"""
import functools

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

LOG2E = 1.4426950408889634


@gluon.jit
def _tile(t, n_m, BH, N, CAUSAL: gl.constexpr, LPT: gl.constexpr, BLOCK_N: gl.constexpr):
    """Tile t -> (first query row of the tile, its row in the flattened (B*H*N, D) tensors, its first key row,
    how many key blocks it reads). Head by head, so programs running together share K and V in L2 (causal: each
    head's longest rows first); with ``LPT`` (causal, short sequences) longest rows first over all heads, so the
    short tiles fill the last wave, at the cost of that sharing."""
    if LPT:
        m = n_m - 1 - t // BH
        bh = t % BH
    else:
        m = t % n_m
        bh = t // n_m
        if CAUSAL:
            m = n_m - 1 - m
    if CAUSAL:
        n_blocks = gl.cdiv((m + 1) * 128, BLOCK_N)
    else:
        n_blocks = N // BLOCK_N
    return m * 128, bh * N + m * 128, bh * N, n_blocks


@gluon.jit
def _loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready, kv_free, n_m, BH, N,
            HALF: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_D: gl.constexpr, STAGES: gl.constexpr,
            CAUSAL: gl.constexpr, LPT: gl.constexpr):
    g = 0  # key blocks loaded so far by this program, over all its tiles: the ring's position
    i = 0  # tiles so far: the Q barriers' phase
    for t in range(gl.program_id(0), n_m * BH, gl.num_programs(0)):
        q_start, q_row, kv_row, n_blocks = _tile(t, n_m, BH, N, CAUSAL, LPT, BLOCK_N)
        # each half of the query tile on its own barrier, once its consumer has issued the last tile's last Q K^T
        for c in gl.static_range(2):
            mbarrier.wait(q_free.index(c), (i & 1) ^ 1)
            mbarrier.expect(q_bar.index(c), HALF * HEAD_D * 2)
            tma.async_copy_global_to_shared(q_desc, [q_row + c * HALF, 0], q_bar.index(c), q_smem.index(c))
        for j in range(n_blocks):
            s = (g + j) % STAGES
            # a stage is free once both consumers have finished its P V (a fresh barrier passes parity 1 at once)
            mbarrier.wait(kv_free.index(s), (((g + j) // STAGES) & 1) ^ 1)
            mbarrier.expect(k_ready.index(s), BLOCK_N * HEAD_D * 2)
            tma.async_copy_global_to_shared(k_desc, [kv_row + j * BLOCK_N, 0], k_ready.index(s), k_smem.index(s))
            mbarrier.expect(v_ready.index(s), BLOCK_N * HEAD_D * 2)
            tma.async_copy_global_to_shared(v_desc, [kv_row + j * BLOCK_N, 0], v_ready.index(s), v_smem.index(s))
        g += n_blocks
        i += 1


@gluon.jit
def _softmax_step(sc, m_i, l_i, q_pos, k_start, qk_scale, MASKED: gl.constexpr, s_layout: gl.constexpr,
                  BLOCK_N: gl.constexpr):
    """One key block's online-softmax update: returns (p, alpha, new max, new sum). Scores arrive unscaled."""
    sc = sc * qk_scale
    if MASKED:
        k_pos = k_start + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        sc = gl.where(q_pos[:, None] >= k_pos[None, :], sc, -float("inf"))
    m_new = gl.maximum(m_i, gl.max(sc, 1))
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(sc - m_new[:, None])
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_i


@gluon.jit
def _plain_step(j, g, acc, m_i, l_i, q, k_smem, v_smem, k_ready, v_ready, kv_free, stagger, zero_s, q_pos, qk_scale,
                LEAD: gl.constexpr, MASKED: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr,
                p_layout: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """Key block j of the tile (the ring's block g + j), each product waited for before the next step: the
    overlap comes from the other warpgroup."""
    st = (g + j) % STAGES
    ph = ((g + j) // STAGES) & 1
    mbarrier.wait(k_ready.index(st), ph)
    s_tok = warpgroup_mma(q, k_smem.index(st).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    sc = warpgroup_mma_wait(0, deps=[s_tok])
    p, alpha, m_i, l_i = _softmax_step(sc, m_i, l_i, q_pos, j * BLOCK_N, qk_scale, MASKED, s_layout, BLOCK_N)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    pa = gl.convert_layout(p.to(gl.float16), p_layout)
    mbarrier.wait(v_ready.index(st), ph)
    o_tok = warpgroup_mma(pa, v_smem.index(st), acc, is_async=True)
    acc, pa = warpgroup_mma_wait(0, deps=[o_tok, pa])
    mbarrier.arrive(kv_free.index(st), count=1)
    if LEAD:  # the leading consumer lets the other start once it has finished the program's first key block
        mbarrier.arrive(stagger, count=1, pred=(g + j) == 0)
    return acc, m_i, l_i


@gluon.jit
def _take_turn(turn, k, C: gl.constexpr):
    """Wait for this consumer's k-th turn: consumer 0 has the first (a fresh barrier passes parity 1 at once), and
    each consumer's turn k follows the other's arrival after its own turn k - 1 (consumer 0) or k (consumer 1)."""
    if C == 0:
        mbarrier.wait(turn.index(0), (k & 1) ^ 1)
    else:
        mbarrier.wait(turn.index(1), k & 1)


@gluon.jit
def _pipe_step(j, g, acc, pa, m_i, l_i, q, k_smem, v_smem, k_ready, v_ready, kv_free, stagger, turn, tbase, zero_s,
               q_pos, qk_scale, LEAD: gl.constexpr, MASKED: gl.constexpr, s_layout: gl.constexpr,
               o_layout: gl.constexpr, p_layout: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
               PINGPONG: gl.constexpr, C: gl.constexpr):
    """Block j's P V (``pa`` holds its probabilities) overlapped with block j+1's Q K^T and softmax (``MASKED``:
    block j+1 crosses the diagonal). Returns block j+1's state with the accumulator already rescaled for it.
    ``PINGPONG``: the two consumers take turns issuing their pair of products (turn ``tbase + j`` of this program)."""
    st = (g + j) % STAGES
    st1 = (g + j + 1) % STAGES
    mbarrier.wait(k_ready.index(st1), ((g + j + 1) // STAGES) & 1)
    if PINGPONG:
        _take_turn(turn, tbase + j, C)
    s_tok = warpgroup_mma(q, k_smem.index(st1).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    mbarrier.wait(v_ready.index(st), ((g + j) // STAGES) & 1)
    o_tok = warpgroup_mma(pa, v_smem.index(st), acc, is_async=True)
    if PINGPONG:  # both products issued: the other consumer may issue its pair, which queues behind these
        mbarrier.arrive(turn.index(1 - C), count=1)
    sc = warpgroup_mma_wait(1, deps=[s_tok])
    p, alpha, m_i, l_i = _softmax_step(sc, m_i, l_i, q_pos, (j + 1) * BLOCK_N, qk_scale, MASKED, s_layout, BLOCK_N)
    acc, pa = warpgroup_mma_wait(0, deps=[o_tok, pa])
    mbarrier.arrive(kv_free.index(st), count=1)
    if LEAD:  # the leading consumer lets the other start once it has finished the program's first key block
        mbarrier.arrive(stagger, count=1, pred=(g + j) == 0)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    return acc, gl.convert_layout(p.to(gl.float16), p_layout), m_i, l_i


@gluon.jit
def _consumer(o_ptr, lse_ptr, q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready, kv_free, stagger, turn, n_m,
              BH, N, qk_scale, C: gl.constexpr, HALF: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_D: gl.constexpr,
              STAGES: gl.constexpr, CAUSAL: gl.constexpr, LPT: gl.constexpr, PIPE: gl.constexpr,
              STAGGER: gl.constexpr, PINGPONG: gl.constexpr):
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    zero_s = gl.zeros([HALF, BLOCK_N], gl.float32, s_layout)
    q = q_smem.index(C)
    # STAGGER: the second consumer starts one key block behind the first and stays behind (the ring lets the first
    # lead by up to STAGES - 1 blocks), so that one's tile boundary (the last P V, the epilogue, the next tile's
    # first Q K^T and softmax) falls inside the other's main loop instead of both idling the tensor cores at once
    LEAD: gl.constexpr = STAGGER and C == 0
    if STAGGER and C == 1:
        mbarrier.wait(stagger, 0)
    g = 0
    i = 0
    for t in range(gl.program_id(0), n_m * BH, gl.num_programs(0)):
        q_start, q_row, kv_row, n_blocks = _tile(t, n_m, BH, N, CAUSAL, LPT, BLOCK_N)
        q_pos = q_start + C * HALF + gl.arange(0, HALF, layout=row_s)
        m_i = gl.full([HALF], -float("inf"), gl.float32, row_s)
        l_i = gl.zeros([HALF], gl.float32, row_s)
        acc = gl.zeros([HALF, HEAD_D], gl.float32, o_layout)
        mbarrier.wait(q_bar.index(C), i & 1)

        # causal: key blocks from `n_full` on cross this half's diagonal (masked); past `n_mine` they are wholly
        # masked for this half (the other half may still need them), so this half only frees their stage
        if CAUSAL:
            n_full = (q_start + C * HALF) // BLOCK_N
            n_mine = gl.cdiv(q_start + C * HALF + HALF, BLOCK_N)
        else:
            n_full = n_blocks
            n_mine = n_blocks

        if PIPE:
            # FlashAttention-3's order: block j+1's Q K^T is issued before block j's P V, and block j+1's softmax
            # runs while that P V is on the tensor cores (wgmma groups retire in issue order, so waiting down to
            # one outstanding group leaves only the P V in flight)
            mbarrier.wait(k_ready.index(g % STAGES), (g // STAGES) & 1)
            s_tok = warpgroup_mma(q, k_smem.index(g % STAGES).permute((1, 0)), zero_s, use_acc=False, is_async=True)
            sc = warpgroup_mma_wait(0, deps=[s_tok])
            if n_full > 0:
                p, alpha, m_i, l_i = _softmax_step(sc, m_i, l_i, q_pos, 0, qk_scale, False, s_layout, BLOCK_N)
            else:
                p, alpha, m_i, l_i = _softmax_step(sc, m_i, l_i, q_pos, 0, qk_scale, True, s_layout, BLOCK_N)
            pa = gl.convert_layout(p.to(gl.float16), p_layout)
            for j in range(0, n_full - 1):
                acc, pa, m_i, l_i = _pipe_step(j, g, acc, pa, m_i, l_i, q, k_smem, v_smem, k_ready, v_ready,
                                               kv_free, stagger, turn, g - i, zero_s, q_pos, qk_scale, LEAD, False,
                                               s_layout, o_layout, p_layout, BLOCK_N, STAGES, PINGPONG, C)
            for j in range(gl.maximum(n_full - 1, 0), n_mine - 1):
                acc, pa, m_i, l_i = _pipe_step(j, g, acc, pa, m_i, l_i, q, k_smem, v_smem, k_ready, v_ready,
                                               kv_free, stagger, turn, g - i, zero_s, q_pos, qk_scale, LEAD, True,
                                               s_layout, o_layout, p_layout, BLOCK_N, STAGES, PINGPONG, C)
            mbarrier.arrive(q_free.index(C), count=1)  # the tile's last Q K^T is done: the next tile's Q may land
            last = g + n_mine - 1
            mbarrier.wait(v_ready.index(last % STAGES), (last // STAGES) & 1)
            o_tok = warpgroup_mma(pa, v_smem.index(last % STAGES), acc, is_async=True)
            acc, pa = warpgroup_mma_wait(0, deps=[o_tok, pa])
            mbarrier.arrive(kv_free.index(last % STAGES), count=1)
            if LEAD:
                mbarrier.arrive(stagger, count=1, pred=last == 0)
        else:
            for j in range(0, n_full):
                acc, m_i, l_i = _plain_step(j, g, acc, m_i, l_i, q, k_smem, v_smem, k_ready, v_ready, kv_free,
                                            stagger, zero_s, q_pos, qk_scale, LEAD, False, s_layout, o_layout,
                                            p_layout, BLOCK_N, STAGES)
            for j in range(n_full, n_mine):
                acc, m_i, l_i = _plain_step(j, g, acc, m_i, l_i, q, k_smem, v_smem, k_ready, v_ready, kv_free,
                                            stagger, zero_s, q_pos, qk_scale, LEAD, True, s_layout, o_layout,
                                            p_layout, BLOCK_N, STAGES)
            mbarrier.arrive(q_free.index(C), count=1)
        for j in range(n_mine, n_blocks):  # causal: blocks only the other half reads
            # wait for the block to land before freeing it: its landing proves the other half freed the stage's
            # previous block, so this arrival cannot complete that earlier release (and let the loader overwrite
            # a stage still being read, or run the barrier two phases ahead of the loader's parity wait)
            mbarrier.wait(k_ready.index((g + j) % STAGES), ((g + j) // STAGES) & 1)
            mbarrier.arrive(kv_free.index((g + j) % STAGES), count=1)
            if PINGPONG:  # keep the turns in step: each consumer takes n_blocks - 1 turns per tile
                _take_turn(turn, g - i + j - 1, C)
                mbarrier.arrive(turn.index(1 - C), count=1)
        g += n_blocks
        i += 1

        # the epilogue: while it runs, the loader is already fetching the next tile's Q, K and V
        l_o = gl.convert_layout(l_i, row_o)
        out = (acc / l_o[:, None]).to(gl.float16)
        rows = q_row + C * HALF + gl.arange(0, HALF, layout=row_o)
        cols = gl.arange(0, HEAD_D, layout=gl.SliceLayout(0, o_layout))
        gl.store(o_ptr + rows.to(gl.int64)[:, None] * HEAD_D + cols[None, :], out)
        # log-sum-exp in natural-log units, as lesson 08's solution returns it
        gl.store(lse_ptr + q_row + C * HALF + gl.arange(0, HALF, layout=row_s),
                 (m_i + gl.log2(l_i)) / 1.4426950408889634)


@gluon.jit
def attention_fwd_kernel(q_desc, k_desc, v_desc, o_ptr, lse_ptr, N, BH, qk_scale, HEAD_D: gl.constexpr,
                         BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr, LPT: gl.constexpr,
                         PIPE: gl.constexpr, CONSUMER_REGS: gl.constexpr, STAGGER: gl.constexpr = False,
                         PINGPONG: gl.constexpr = False):
    HALF: gl.constexpr = 64
    n_m = N // 128
    q_smem = gl.allocate_shared_memory(gl.float16, [2, HALF, HEAD_D], q_desc.layout)
    k_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_N, HEAD_D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_N, HEAD_D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    stagger = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(stagger, count=1)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(turn.index(0), count=1)
    mbarrier.init(turn.index(1), count=1)
    for c in gl.static_range(2):
        mbarrier.init(q_bar.index(c), count=1)
        mbarrier.init(q_free.index(c), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(kv_free.index(s), count=2)  # one arrival from each consumer
    fence_async_shared()

    gl.warp_specialize([
        (_consumer, (o_ptr, lse_ptr, q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready, kv_free, stagger, turn,
                     n_m, BH, N, qk_scale, 0, HALF, BLOCK_N, HEAD_D, STAGES, CAUSAL, LPT, PIPE, STAGGER,
                     PINGPONG)),
        (_consumer, (o_ptr, lse_ptr, q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready, kv_free, stagger, turn,
                     n_m, BH, N, qk_scale, 1, HALF, BLOCK_N, HEAD_D, STAGES, CAUSAL, LPT, PIPE, STAGGER,
                     PINGPONG)),
        (_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_free, k_ready, v_ready, kv_free, n_m, BH,
                   N, HALF, BLOCK_N, HEAD_D, STAGES, CAUSAL, LPT)),
    ], [4, 1], [CONSUMER_REGS, 24])


@functools.lru_cache
def _sms(device: int) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def attention(q, k, v, causal, block_n=128, stages=2, pipe=False, persistent=False, consumer_regs=232,
              programs=None, stagger=False, pingpong=False):
    """(o, lse) for q, k, v of shape (B, H, N, D), fp16, contiguous; N a multiple of 128. ``persistent``: one
    program per SM walking the tiles (``programs``: that many instead, to test many tiles per program), else one
    program per tile."""
    B, H, N, D = q.shape
    assert N % 128 == 0 and q.dtype == torch.float16 and D in (64, 128)
    o = torch.empty_like(q)
    lse = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    q2, k2, v2 = (t.reshape(B * H * N, D) for t in (q, k, v))
    q_desc = TensorDescriptor.from_tensor(q2, [64, D], gl.NVMMASharedLayout.get_default_for([64, D], gl.float16))
    kv_layout = gl.NVMMASharedLayout.get_default_for([block_n, D], gl.float16)
    k_desc = TensorDescriptor.from_tensor(k2, [block_n, D], kv_layout)
    v_desc = TensorDescriptor.from_tensor(v2, [block_n, D], kv_layout)
    tiles = N // 128 * B * H
    if persistent:
        tiles = min(tiles, programs or _sms(q.device.index or 0))
    attention_fwd_kernel[(tiles,)](q_desc, k_desc, v_desc, o, lse, N, B * H, D ** -0.5 * LOG2E, HEAD_D=D,
                                   BLOCK_N=block_n, STAGES=stages, CAUSAL=causal, LPT=causal and N <= 2048,
                                   PIPE=pipe, CONSUMER_REGS=consumer_regs, STAGGER=stagger,
                                   PINGPONG=pingpong and pipe, num_warps=4)
    return o, lse
