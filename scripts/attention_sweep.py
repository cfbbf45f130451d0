"""Sweep fixed launch configurations (and a few code variants) of lesson 04's FlashAttention forward and lesson
05's backward against SDPA's cuDNN backend on lesson 08's attention grid (B=4, H=32, N in {1024, 4096, 16384},
D in {64, 128}, causal or not, fp16).

What it does, on a GPU:
  1. loads the solutions the way the lesson 08 bench does (kernellab.notebook_cells.load_solution);
  2. compiles every (kernel, configuration) it will time in parallel worker processes (Triton's on-disk cache
     then serves the main process), so that ~350 compiles cost about a minute instead of ten;
  3. checks the code variants written below against a float32 PyTorch reference at small shapes with odd N
     (1, 37, 129, 300), causal and not; a variant that fails is not timed;
  4. per grid shape: times every forward candidate, every dK/dV and every dQ candidate with fixed
     configurations (no autotuning; each candidate's output is first compared with the solution's own output
     at that shape), the solution's autotuned functions, and cuDNN forward and backward, with
     triton.testing.do_bench; then re-times the best forward and the best backward pair beside the solution and
     cuDNN with the course timer (kernellab.timing.interleaved, as the lesson 08 bench does), so that those
     ratios compare with the committed benchmark's;
  5. prints compact tables and writes everything to $OUT/attention_sweep.json.

Variants (kernels in this file, same signatures as the solution's):
  * ``split`` dK/dV and dQ kernels: the query (dK/dV) or key (dQ) loop is split, as the forward's attend_blocks
    is, into whole blocks that need no mask (no tl.where, unmasked loads) and masked blocks (the diagonal band
    when causal, the partial tail block);
  * ``lazy`` forward: in the unmasked blocks the running max m is only raised (and acc, l rescaled) when some
    row's max grew by more than 8 (log2 units, a factor 256; FlashAttention-4's trick): most blocks skip the
    acc * alpha rescale.

Run from the repository root:
    PYTHONPATH=autograder python scripts/attention_sweep.py            # the GPU sweep (< 8 min on an H100)
    PYTHONPATH=autograder python scripts/attention_sweep.py --quick    # a smoke run: 2 shapes, 3 configs each
    PYTHONPATH=autograder python scripts/attention_sweep.py --cpu-check  # correctness only, CPU interpreter
"""
from __future__ import annotations

import os
import sys

if __name__ == "__main__" and "--cpu-check" in sys.argv:  # before kernellab/triton are imported
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("KERNELLAB_FORCE_CPU", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

import torch  # noqa: E402

import kernellab as kl  # noqa: E402,F401  (decides GPU or interpreter before triton is imported)
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from kernellab.compare import rel_error_on_device  # noqa: E402

LOG2E = 1.4426950408889634
B_GRID, H_GRID = 4, 32
GRID = [(D, N, causal) for D in (128, 64) for N in (4096, 16384, 1024) for causal in (False, True)]  # D=128 first
QUICK_GRID = [(64, 1024, False), (128, 4096, True)]

# (BLOCK_M, BLOCK_N, num_warps, num_stages). Each list holds the solution's own configurations (so the
# autotuned solution reuses these compiles) plus wider ones.
FWD_CANDIDATES = [(64, 32, 4, 2), (64, 64, 4, 3), (128, 64, 4, 3), (128, 64, 4, 4), (128, 64, 8, 3), (128, 64, 8, 4),
                  (128, 128, 8, 3),  # ^ the solution's FWD_CONFIGS
                  (128, 128, 8, 2), (128, 128, 8, 4), (128, 128, 4, 3), (64, 128, 4, 3), (128, 32, 4, 3),
                  (256, 64, 8, 3)]
DKDV_CANDIDATES = [(32, 64, 4, 1), (32, 128, 8, 2), (64, 128, 8, 2), (64, 64, 4, 2), (64, 128, 8, 3), (32, 64, 4, 3),
                   (64, 64, 8, 3), (128, 128, 8, 2),  # ^ the solution's BWD_CONFIGS
                   (32, 128, 4, 3), (32, 128, 8, 3), (64, 64, 4, 3)]
DQ_CANDIDATES = [(64, 32, 4, 1), (128, 32, 4, 2), (128, 64, 8, 2), (64, 64, 4, 2), (128, 64, 8, 3), (128, 32, 8, 3),
                 (64, 32, 4, 3), (128, 128, 8, 2),  # ^ the solution's DQ_CONFIGS
                 (128, 32, 4, 3), (128, 64, 4, 3), (128, 32, 4, 4)]
QUICK_PICK = {"fwd": [(128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3)],
              "dkdv": [(64, 128, 8, 2), (32, 128, 8, 2), (64, 64, 4, 2)],
              "dq": [(128, 64, 8, 2), (128, 32, 4, 2), (64, 64, 4, 2)]}

# Small-shape correctness: (B, H, N, D, causal); the configurations checked per kernel (odd BLOCK_M / BLOCK_N
# ratios on purpose).
# A 6th element "ramp" scales key j by 1 + 4 j / N: the row max then grows along the key loop, past the lazy
# forward's threshold, so that its rescale branch is taken mid-loop and not only on the first block.
CHECK_SHAPES = ([(1, 2, N, D, c) for N in (1, 37, 129, 300) for D in (64, 128) for c in (False, True)]
                + [(1, 2, 300, D, c, "ramp") for D in (64, 128) for c in (False, True)])
CPU_CHECK_SHAPES = ([(1, 2, N, 64, c) for N in (1, 37, 129, 300) for c in (False, True)]
                    + [(1, 1, N, 128, c) for N in (37, 129) for c in (False, True)]
                    + [(2, 1, 300, 16, True), (1, 2, 300, 64, False, "ramp"), (1, 2, 300, 64, True, "ramp")])
CHECK_CONFIGS = {"fwd": [(64, 32, 4, 2), (128, 64, 8, 3)],
                 "dkdv": [(32, 64, 4, 1), (64, 128, 8, 2)],
                 "dq": [(64, 32, 4, 1), (128, 64, 8, 2)]}
CPU_CHECK_CONFIGS = {"fwd": [(64, 32, 4, 2), (32, 64, 4, 2), (16, 16, 4, 2)],
                     "dkdv": [(32, 64, 4, 1), (64, 32, 4, 2), (16, 16, 4, 2)],
                     "dq": [(64, 32, 4, 1), (32, 64, 4, 2), (16, 16, 4, 2)]}
TOL = {"o": 1e-2, "lse": 1e-4, "dq": 1e-2, "dk": 1e-2, "dv": 1e-2}  # fp16 outputs: kernellab.compare.REL_TOL
SAME_AS_SOLUTION_TOL = 1e-2  # a candidate's output vs the solution's own, at a grid shape


def supported(kind, cfg, causal, variant="solution") -> bool:
    """With a causal mask a kernel walks the diagonal in steps of its inner block after the unmasked blocks, so the
    outer block must be a multiple of the inner one: the forward (solution and lazy) needs BLOCK_M % BLOCK_N == 0,
    and lesson 05's backward since it masks only the diagonal (2026-11-26) needs BLOCK_N % BLOCK_M == 0 for dK/dV
    and BLOCK_M % BLOCK_N == 0 for dQ, as every entry of its BWD_CONFIGS and DQ_CONFIGS is. This script's own
    split backward kernels take any pair."""
    if not causal or (kind != "fwd" and variant != "solution"):
        return True
    return cfg[1] % cfg[0] == 0 if kind == "dkdv" else cfg[0] % cfg[1] == 0


# ====================================================================== variant kernels
@triton.jit
def _batch_head(H):
    """The program's (batch * H + head) index from grid axis 1, and its batch and head as int64 (offsets)."""
    bh = tl.program_id(1)
    return bh, (bh // H).to(tl.int64), (bh % H).to(tl.int64)


@triton.jit
def _attend_blocks_lazy(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, rows, lo, hi, n_keys, qk_scale,
                        BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """The solution's attend_blocks; in the unmasked blocks the max is raised lazily (threshold 8 in log2 units):
    p = exp2(s - m) then stays <= 2^8, harmless in fp16, and acc, l are rescaled only when m moves."""
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        if MASKED:
            k = tl.load(k_ptrs + start * stride_kn, mask=cols[None, :] < n_keys, other=0.0)
        else:
            k = tl.load(k_ptrs + start * stride_kn)
        s = tl.dot(q, k)
        if MASKED:
            keep = cols[None, :] < n_keys
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            s = tl.where(keep, s, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            alpha = tl.math.exp2(m_i - m_new)
            acc = acc * alpha[:, None]
            l_i = l_i * alpha
            m_i = m_new
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            if tl.max(m_new - m_i, 0) > 8.0:  # the first block (m = -inf) always takes this branch
                alpha = tl.math.exp2(m_i - m_new)
                acc = acc * alpha[:, None]
                l_i = l_i * alpha
                m_i = m_new
        p = tl.math.exp2(s * qk_scale - m_i[:, None])
        l_i = l_i + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_ptrs + start * stride_vn, mask=cols[:, None] < n_keys, other=0.0)
        else:
            v = tl.load(v_ptrs + start * stride_vn)
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, m_i, l_i


@triton.jit
def flash_fwd_lazy_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
                          stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                          stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on,
                          H, N_CTX, qk_scale,
                          HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - start_m
    bh, b, h = _batch_head(H)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + b * stride_qb + h * stride_qh + rows[:, None] * stride_qn + d[None, :],
                mask=rows[:, None] < N_CTX, other=0.0)
    n = tl.arange(0, BLOCK_N)
    k_ptrs = k_ptr + b * stride_kb + h * stride_kh + n[None, :] * stride_kn + d[:, None]
    v_ptrs = v_ptr + b * stride_vb + h * stride_vh + n[:, None] * stride_vn + d[None, :]
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    if CAUSAL:
        full = start_m * BLOCK_M
        end = tl.minimum(full + BLOCK_M, N_CTX)
    else:
        full = (N_CTX // BLOCK_N) * BLOCK_N
        end = N_CTX
    acc, m_i, l_i = _attend_blocks_lazy(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, rows, 0, full, N_CTX,
                                        qk_scale, BLOCK_N, False, CAUSAL)
    acc, m_i, l_i = _attend_blocks_lazy(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, rows, full, end,
                                        N_CTX, qk_scale, BLOCK_N, True, CAUSAL)
    o = acc / l_i[:, None]
    tl.store(o_ptr + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + d[None, :],
             o.to(o_ptr.dtype.element_ty), mask=rows[:, None] < N_CTX)
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
    tl.store(lse_ptr + bh * N_CTX + rows, lse, mask=rows < N_CTX)


@triton.jit
def _dkdv_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, stride_qn, stride_dn, lse_row, delta_row, cols, lo, hi, N_CTX,
                 qk_scale, BLOCK_M: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """Query blocks [lo, hi) of one dK/dV program. Unmasked: whole blocks of rows < N that see every key of this
    program (no loads masked, no tl.where). Masked: the causal diagonal band and the partial last block."""
    m = tl.arange(0, BLOCK_M)
    for start in range(lo, hi, BLOCK_M):
        start = tl.multiple_of(start, BLOCK_M)
        rows = start + m
        if MASKED:
            row_ok = rows < N_CTX
            qT = tl.load(qT_ptrs + start * stride_qn, mask=row_ok[None, :], other=0.0)
            lse = tl.load(lse_row + rows, mask=row_ok, other=0.0)
        else:
            qT = tl.load(qT_ptrs + start * stride_qn)
            lse = tl.load(lse_row + rows)
        pT = tl.math.exp2(tl.dot(k, qT) * qk_scale - lse[None, :] * 1.4426950408889634)
        if MASKED:
            keep = row_ok[None, :]
            if CAUSAL:
                keep = keep & (cols[:, None] <= rows[None, :])
            pT = tl.where(keep, pT, 0.0)
            do = tl.load(do_ptrs + start * stride_dn, mask=row_ok[:, None], other=0.0)
            delta = tl.load(delta_row + rows, mask=row_ok, other=0.0)
        else:
            do = tl.load(do_ptrs + start * stride_dn)
            delta = tl.load(delta_row + rows)
        dv += tl.dot(pT.to(do.dtype), do)
        dsT = pT * (tl.dot(v, tl.trans(do)) - delta[None, :])
        dk += tl.dot(dsT.to(qT.dtype), tl.trans(qT))
    return dk, dv


@triton.jit
def dkdv_split_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
                      stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                      stride_vb, stride_vh, stride_vn, stride_db, stride_dh, stride_dn,
                      H, N_CTX, sm_scale,
                      HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The solution's dkdv_kernel with its query loop split into unmasked and masked parts."""
    bh, b, h = _batch_head(H)
    n0 = tl.program_id(0) * BLOCK_N
    cols = n0 + tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    col_ok = cols[:, None] < N_CTX
    k = tl.load(k_ptr + b * stride_kb + h * stride_kh + cols[:, None] * stride_kn + d[None, :], mask=col_ok, other=0.0)
    v = tl.load(v_ptr + b * stride_vb + h * stride_vh + cols[:, None] * stride_vn + d[None, :], mask=col_ok, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    m = tl.arange(0, BLOCK_M)
    qT_ptrs = q_ptr + b * stride_qb + h * stride_qh + m[None, :] * stride_qn + d[:, None]
    do_ptrs = do_ptr + b * stride_db + h * stride_dh + m[:, None] * stride_dn + d[None, :]
    lse_row = lse_ptr + bh * N_CTX
    delta_row = delta_ptr + bh * N_CTX
    qk_scale = sm_scale * 1.4426950408889634
    # Keys >= N (a partial key block) need no mask here: k and v are 0 there, and their dK/dV rows are not stored.
    full_end = (N_CTX // BLOCK_M) * BLOCK_M  # query blocks wholly inside [0, N)
    if CAUSAL:
        lo = (n0 // BLOCK_M) * BLOCK_M  # earlier query rows see none of these keys
        diag_end = lo + ((n0 + BLOCK_N - lo + BLOCK_M - 1) // BLOCK_M) * BLOCK_M  # rows >= diag_end see them all
        dk, dv = _dkdv_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, stride_qn, stride_dn, lse_row, delta_row, cols,
                              lo, tl.minimum(diag_end, N_CTX), N_CTX, qk_scale, BLOCK_M, True, True)
        dk, dv = _dkdv_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, stride_qn, stride_dn, lse_row, delta_row, cols,
                              diag_end, full_end, N_CTX, qk_scale, BLOCK_M, False, True)
        dk, dv = _dkdv_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, stride_qn, stride_dn, lse_row, delta_row, cols,
                              tl.maximum(diag_end, full_end), N_CTX, N_CTX, qk_scale, BLOCK_M, True, True)
    else:
        dk, dv = _dkdv_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, stride_qn, stride_dn, lse_row, delta_row, cols,
                              0, full_end, N_CTX, qk_scale, BLOCK_M, False, False)
        dk, dv = _dkdv_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, stride_qn, stride_dn, lse_row, delta_row, cols,
                              full_end, N_CTX, N_CTX, qk_scale, BLOCK_M, True, False)
    dk *= sm_scale
    out = bh * N_CTX * HEAD_DIM + cols[:, None] * HEAD_DIM + d[None, :]
    tl.store(dk_ptr + out, dk.to(dk_ptr.dtype.element_ty), mask=col_ok)
    tl.store(dv_ptr + out, dv.to(dv_ptr.dtype.element_ty), mask=col_ok)


@triton.jit
def _dq_blocks(dq, q, do, lse2, delta, kT_ptrs, vT_ptrs, stride_kn, stride_vn, rows, lo, hi, N_CTX, qk_scale,
               BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """Key blocks [lo, hi) of one dQ program. Unmasked: whole blocks of keys < N every row of the program sees.
    Masked: the causal diagonal band and the partial last key block."""
    n = tl.arange(0, BLOCK_N)
    for start in range(lo, hi, BLOCK_N):
        start = tl.multiple_of(start, BLOCK_N)
        cols = start + n
        if MASKED:
            col_ok = cols[None, :] < N_CTX
            kT = tl.load(kT_ptrs + start * stride_kn, mask=col_ok, other=0.0)
            vT = tl.load(vT_ptrs + start * stride_vn, mask=col_ok, other=0.0)
        else:
            kT = tl.load(kT_ptrs + start * stride_kn)
            vT = tl.load(vT_ptrs + start * stride_vn)
        p = tl.math.exp2(tl.dot(q, kT) * qk_scale - lse2[:, None])
        if MASKED:
            keep = col_ok
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            p = tl.where(keep, p, 0.0)
        ds = p * (tl.dot(do, vT) - delta[:, None])
        dq += tl.dot(ds.to(kT.dtype), tl.trans(kT))
    return dq


@triton.jit
def dq_split_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
                    stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                    stride_vb, stride_vh, stride_vn, stride_db, stride_dh, stride_dn,
                    H, N_CTX, sm_scale,
                    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The solution's dq_kernel with its key loop split into unmasked and masked parts."""
    bh, b, h = _batch_head(H)
    m0 = tl.program_id(0) * BLOCK_M
    rows = m0 + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD_DIM)
    row_ok = rows < N_CTX
    # Rows >= N load q = dO = lse = delta = 0: p = 1 but dS = 1 * (0 - 0) = 0 there, and they are not stored.
    q = tl.load(q_ptr + b * stride_qb + h * stride_qh + rows[:, None] * stride_qn + d[None, :],
                mask=row_ok[:, None], other=0.0)
    do = tl.load(do_ptr + b * stride_db + h * stride_dh + rows[:, None] * stride_dn + d[None, :],
                 mask=row_ok[:, None], other=0.0)
    lse2 = tl.load(lse_ptr + bh * N_CTX + rows, mask=row_ok, other=0.0) * 1.4426950408889634
    delta = tl.load(delta_ptr + bh * N_CTX + rows, mask=row_ok, other=0.0)
    n = tl.arange(0, BLOCK_N)
    kT_ptrs = k_ptr + b * stride_kb + h * stride_kh + n[None, :] * stride_kn + d[:, None]
    vT_ptrs = v_ptr + b * stride_vb + h * stride_vh + n[None, :] * stride_vn + d[:, None]
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        full_end = ((m0 + 1) // BLOCK_N) * BLOCK_N  # key blocks wholly at or below row m0: all visible, all < N
        hi = tl.minimum(m0 + BLOCK_M, N_CTX)
        dq = _dq_blocks(dq, q, do, lse2, delta, kT_ptrs, vT_ptrs, stride_kn, stride_vn, rows, 0, full_end, N_CTX,
                        qk_scale, BLOCK_N, False, True)
        dq = _dq_blocks(dq, q, do, lse2, delta, kT_ptrs, vT_ptrs, stride_kn, stride_vn, rows, full_end, hi, N_CTX,
                        qk_scale, BLOCK_N, True, True)
    else:
        full_end = (N_CTX // BLOCK_N) * BLOCK_N
        dq = _dq_blocks(dq, q, do, lse2, delta, kT_ptrs, vT_ptrs, stride_kn, stride_vn, rows, 0, full_end, N_CTX,
                        qk_scale, BLOCK_N, False, False)
        dq = _dq_blocks(dq, q, do, lse2, delta, kT_ptrs, vT_ptrs, stride_kn, stride_vn, rows, full_end, N_CTX,
                        N_CTX, qk_scale, BLOCK_N, True, False)
    dq *= sm_scale
    tl.store(dq_ptr + bh * N_CTX * HEAD_DIM + rows[:, None] * HEAD_DIM + d[None, :], dq.to(dq_ptr.dtype.element_ty),
             mask=row_ok[:, None])


# ====================================================================== loading and launching
def _unwrap(kernel):
    """The jitted function under kl.autotune / triton.autotune (Autotuner.fn), for fixed-configuration launches."""
    from triton.runtime.autotuner import Autotuner
    while isinstance(kernel, Autotuner):
        kernel = kernel.fn
    return kernel


def load_kernels(quiet: bool = True) -> dict:
    """Solutions through the package's loader (as kernellab/lessons/l08_hopper/bench.py does) plus the variants:
    {"l04", "l05": solution namespaces, "kernels": {(kind, variant): jitted kernel, autotuning unwrapped},
    "delta": the solution's delta_kernel}."""
    from kernellab.notebook_cells import load_solution
    sink = io.StringIO() if quiet else sys.stdout
    with contextlib.redirect_stdout(sink):  # the config cells print their shared-memory tables
        l04 = load_solution("04_flash_attention", ("flash_attention",))
        l05 = load_solution("05_flash_attention_backward", ("flash_attention_backward",))
    kernels = {("fwd", "solution"): _unwrap(l04["flash_fwd_kernel"]), ("fwd", "lazy"): flash_fwd_lazy_kernel,
               ("dkdv", "solution"): _unwrap(l05["dkdv_kernel"]), ("dkdv", "split"): dkdv_split_kernel,
               ("dq", "solution"): _unwrap(l05["dq_kernel"]), ("dq", "split"): dq_split_kernel}
    return {"l04": l04, "l05": l05, "kernels": kernels, "delta": l05["delta_kernel"]}


def cfg_tuple(config) -> tuple | None:
    if config is None:
        return None
    return (config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"], config.num_warps, config.num_stages)


def _go(kernel, grid, args, kw, warmup):
    if warmup:
        return kernel.warmup(*args, grid=grid, **kw)
    return kernel[grid](*args, **kw)


def launch_fwd(kernel, q, k, v, o, lse, causal, cfg, warmup=False):
    """What the solution's flash_attention launches, with a fixed configuration."""
    B, H, N, D = q.shape
    bm, bn, w, s = cfg
    args = (q, k, v, o, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
            H, N, LOG2E / math.sqrt(D))
    kw = dict(HEAD_DIM=D, CAUSAL=bool(causal), BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)
    return _go(kernel, (triton.cdiv(N, bm), B * H), args, kw, warmup)


def launch_delta(delta_kernel, o, do, delta, warmup=False):
    B, H, N, D = o.shape
    args = (o, do, delta, *o.stride()[:3], *do.stride()[:3], H, N)
    return _go(delta_kernel, (triton.cdiv(N, 64), B * H), args, dict(HEAD_DIM=D, BLOCK_M=64), warmup)


def _bwd_args(q, k, v, do):
    B, H, N, D = q.shape
    return (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], H, N, 1.0 / math.sqrt(D))


def launch_dkdv(kernel, q, k, v, do, lse, delta, dk, dv, causal, cfg, warmup=False):
    """What the solution's flash_attention_backward launches for dK/dV, with a fixed configuration."""
    B, H, N, D = q.shape
    bm, bn, w, s = cfg
    args = (q, k, v, do, lse, delta, dk, dv, *_bwd_args(q, k, v, do))
    kw = dict(HEAD_DIM=D, CAUSAL=bool(causal), BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)
    return _go(kernel, (triton.cdiv(N, bn), B * H), args, kw, warmup)


def launch_dq(kernel, q, k, v, do, lse, delta, dq, causal, cfg, warmup=False):
    B, H, N, D = q.shape
    bm, bn, w, s = cfg
    args = (q, k, v, do, lse, delta, dq, *_bwd_args(q, k, v, do))
    kw = dict(HEAD_DIM=D, CAUSAL=bool(causal), BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)
    return _go(kernel, (triton.cdiv(N, bm), B * H), args, kw, warmup)


def fwd_fixed(ks, variant, cfg):
    kern = ks["kernels"][("fwd", variant)]

    def run(q, k, v, causal):
        B, H, N, D = q.shape
        o = torch.empty_like(q)
        lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
        launch_fwd(kern, q, k, v, o, lse, causal, cfg)
        return o, lse
    return run


def bwd_fixed(ks, kv_variant, kv_cfg, q_variant, q_cfg):
    """flash_attention_backward with chosen dK/dV and dQ kernels and fixed configurations."""
    kv, qk, delta_kernel = ks["kernels"][("dkdv", kv_variant)], ks["kernels"][("dq", q_variant)], ks["delta"]

    def run(q, k, v, o, lse, do, causal):
        B, H, N, D = q.shape
        dq = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
        dk, dv = torch.empty_like(dq), torch.empty_like(dq)
        delta = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
        launch_delta(delta_kernel, o, do, delta)
        launch_dkdv(kv, q, k, v, do, lse, delta, dk, dv, causal, kv_cfg)
        launch_dq(qk, q, k, v, do, lse, delta, dq, causal, q_cfg)
        return dq, dk, dv
    return run


def solution_wrapper_with(ks, dkdv_kernel, dq_kernel):
    """The solution's own flash_attention_backward, its dkdv_kernel / dq_kernel globals replaced (drop-in use)."""
    fn = ks["l05"]["flash_attention_backward"]
    g = dict(fn.__globals__, dkdv_kernel=dkdv_kernel, dq_kernel=dq_kernel)
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)


# ====================================================================== correctness
def _check_inputs(shape, device, seed):
    from kernellab.lessons.attention import attention_grads_reference, attention_reference, qkv
    B, H, N, D, causal = shape[:5]
    gen = torch.Generator(device).manual_seed(seed)
    q, k, v, do = qkv(gen, B, H, N, D, n=4, device=device)
    if "ramp" in shape[5:]:
        k = (k.float() * (1 + 4 * torch.arange(N, device=device) / N)[:, None]).half()
    dt = torch.float64 if device == "cpu" else torch.float32
    o_ref, lse_ref = attention_reference(q, k, v, causal, dtype=dt)
    grads = attention_grads_reference(q, k, v, do, causal, dtype=dt)
    return q, k, v, do, o_ref, lse_ref, grads


def check_kernels(ks, which: dict, shapes: list, device: str, log=print) -> dict:
    """which: (kind, variant) -> configurations. Returns (kind, variant) -> {"ok": bool, "failures": [...],
    "max_rel": {...}}: every configuration at every shape against the float64 (CPU) / float32 (GPU) reference.
    The backward kernels get O and the lse from the reference (as the lesson's grader does)."""
    res = {key: {"ok": True, "failures": [], "max_rel": {}, "runs": 0} for key in which}
    for si, shape in enumerate(shapes):
        B, H, N, D, causal = shape[:5]
        q, k, v, do, o_ref, lse_ref, (dq_ref, dk_ref, dv_ref) = _check_inputs(shape, device, 1000 + si)
        o16, lse32 = o_ref.half(), lse_ref.float()
        delta = torch.empty((B, H, N), dtype=torch.float32, device=device)
        launch_delta(ks["delta"], o16, do, delta)
        for (kind, variant), cfgs in which.items():
            r = res[(kind, variant)]
            for cfg in cfgs:
                errs = {}
                if not supported(kind, cfg, causal, variant):
                    continue
                try:
                    if kind == "fwd":
                        o = torch.empty_like(q)
                        lse = torch.empty((B, H, N), dtype=torch.float32, device=device)
                        launch_fwd(ks["kernels"][(kind, variant)], q, k, v, o, lse, causal, cfg)
                        errs = {"o": rel_error_on_device(o, o_ref), "lse": rel_error_on_device(lse, lse_ref)}
                    elif kind == "dkdv":
                        dk, dv = torch.empty_like(q), torch.empty_like(q)
                        launch_dkdv(ks["kernels"][(kind, variant)], q, k, v, do, lse32, delta, dk, dv, causal, cfg)
                        errs = {"dk": rel_error_on_device(dk, dk_ref), "dv": rel_error_on_device(dv, dv_ref)}
                    else:
                        dq = torch.empty_like(q)
                        launch_dq(ks["kernels"][(kind, variant)], q, k, v, do, lse32, delta, dq, causal, cfg)
                        errs = {"dq": rel_error_on_device(dq, dq_ref)}
                except Exception as exc:  # noqa: BLE001
                    r["ok"] = False
                    r["failures"].append({"shape": shape, "cfg": cfg, "error": f"{type(exc).__name__}: {exc}"[:300]})
                    continue
                r["runs"] += 1
                for name, e in errs.items():
                    r["max_rel"][name] = max(r["max_rel"].get(name, 0.0), e)
                    if not (e <= TOL[name]):  # NaN fails too
                        r["ok"] = False
                        r["failures"].append({"shape": shape, "cfg": cfg, name: e})
        log(f"  checked B={B} H={H} N={N} D={D} causal={causal}{' ramp' if shape[5:] else ''}")
    return res


def check_solution_wrapper(ks, device, shapes, log=print) -> bool:
    """The split kernels dropped into the solution's own wrapper (autotuned with the solution's config lists)."""
    l05 = ks["l05"]
    key = ["N_CTX", "HEAD_DIM", "CAUSAL"]
    fn = solution_wrapper_with(ks, kl.autotune(configs=l05["BWD_CONFIGS"], key=key)(dkdv_split_kernel),
                               kl.autotune(configs=l05["DQ_CONFIGS"], key=key)(dq_split_kernel))
    ok = True
    for si, shape in enumerate(shapes):
        q, k, v, do, o_ref, lse_ref, refs = _check_inputs(shape, device, 2000 + si)
        got = fn(q, k, v, o_ref.half(), lse_ref.float(), do, shape[4])
        errs = [rel_error_on_device(g, r) for g, r in zip(got, refs)]
        good = all(e <= 1e-2 for e in errs)
        ok &= good
        log(f"  solution wrapper + split kernels {shape}: rel errors dq/dk/dv "
            + " ".join(f"{e:.1e}" for e in errs) + ("" if good else "  FAILED"))
    return ok


def print_check(res: dict, log=print) -> None:
    for (kind, variant), r in res.items():
        errs = " ".join(f"{n}={e:.1e}" for n, e in sorted(r["max_rel"].items()))
        log(f"  {kind:5s} {variant:9s} {'OK  ' if r['ok'] else 'FAIL'} runs={r['runs']:3d} max rel err: {errs}")
        for f in r["failures"][:5]:
            log(f"      failure: {f}")


def cpu_check(args) -> int:
    t0 = time.monotonic()
    log = lambda s: print(f"[{time.monotonic() - t0:6.1f}s] {s}", flush=True)  # noqa: E731
    log(f"CPU check under the interpreter (TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')}), "
        f"torch {torch.__version__}, triton {triton.__version__}")
    ks = load_kernels()
    which = {key: CPU_CHECK_CONFIGS[key[0]] for key in ks["kernels"]}
    res = check_kernels(ks, which, CPU_CHECK_SHAPES, "cpu", log)
    print_check(res, log)
    wrap_ok = check_solution_wrapper(ks, "cpu", [(1, 2, 129, 64, True), (1, 2, 300, 32, False)], log)
    ok = all(r["ok"] for r in res.values()) and wrap_ok
    log("CPU CHECK PASSED" if ok else "CPU CHECK FAILED")
    return 0 if ok else 1


# ====================================================================== parallel precompilation (GPU)
_WORKER = {}


def _worker_init():
    with contextlib.redirect_stdout(io.StringIO()):
        _WORKER["ks"] = load_kernels()


def _compile_task(task):
    """Compile one (kind, variant, cfg) at one argument specialisation, without launching: the on-disk cache then
    serves the main process. Shapes: B=1 with the real H and N (strides keep their divisibility)."""
    kind, variant, cfg, (H, N, D, causal) = task
    ks = _WORKER["ks"]
    t0 = time.monotonic()
    try:
        q, k, v, do = (torch.zeros((1, H, N, D), dtype=torch.float16, device="cuda") for _ in range(4))
        lse = torch.zeros((1, H, N), dtype=torch.float32, device="cuda")
        if kind == "delta":
            launch_delta(ks["delta"], q, do, lse, warmup=True)
        elif kind == "fwd":
            launch_fwd(ks["kernels"][(kind, variant)], q, k, v, torch.empty_like(q), lse, causal, cfg, warmup=True)
        elif kind == "dkdv":
            launch_dkdv(ks["kernels"][(kind, variant)], q, k, v, do, lse, lse, torch.empty_like(q),
                        torch.empty_like(q), causal, cfg, warmup=True)
        else:
            launch_dq(ks["kernels"][(kind, variant)], q, k, v, do, lse, lse, torch.empty_like(q), causal, cfg,
                      warmup=True)
        return task, None, time.monotonic() - t0
    except Exception as exc:  # noqa: BLE001
        return task, f"{type(exc).__name__}: {exc}"[:300], time.monotonic() - t0


def precompile(tasks: list, workers: int, log) -> dict:
    import concurrent.futures as cf
    import multiprocessing as mp
    t0 = time.monotonic()
    errors, done, cpu_s = {}, 0, 0.0
    log(f"precompiling {len(tasks)} kernels in {workers} worker processes")
    try:
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                                    initializer=_worker_init) as pool:
            for task, err, dt in pool.map(_compile_task, tasks, chunksize=1):
                done += 1
                cpu_s += dt
                if err:
                    errors[repr(task)] = err
                if done % 50 == 0 or done == len(tasks):
                    log(f"  compiled {done}/{len(tasks)} ({len(errors)} failed)")
    except Exception as exc:  # noqa: BLE001 - the main process compiles what is missing, serially
        log(f"  precompilation stopped ({type(exc).__name__}: {exc}); the rest compiles on first use")
    wall = time.monotonic() - t0
    log(f"  precompile: {wall:.0f} s wall, {cpu_s:.0f} s summed over tasks")
    return {"tasks": len(tasks), "done": done, "wall_s": wall, "task_s": cpu_s, "errors": errors}


# ====================================================================== GPU sweep
def _do_bench(fn, quick):
    from kernellab.timing import do_bench_ms
    return do_bench_ms({"t": fn}, warmup=5 if quick else 10, rep=20 if quick else 40)["t"]


def _err_text(exc) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def sweep_shape(ks, D, N, causal, cands, variants, quick, log, deadline, device="cuda") -> dict:
    from kernellab.lessons.attention import attention_flops, qkv, sdpa_on
    from kernellab.lessons.l05_flash_attention_backward.problems import sdpa_backward_of
    from kernellab.timing import interleaved
    from torch.nn.attention import SDPBackend
    cudnn = sdpa_on(SDPBackend.CUDNN_ATTENTION)
    B, H = B_GRID, H_GRID
    q, k, v, do = qkv(torch.Generator(device).manual_seed(N + D), B, H, N, D, n=4, device=device)  # as the bench
    fl = attention_flops(B, H, N, D, causal)
    bfl = attention_flops(B, H, N, D, causal, backward=True)
    row = {"D": D, "N": N, "causal": causal, "B": B, "H": H, "fwd_flops": fl, "bwd_flops": bfl, "fwd": [], "dkdv": [],
           "dq": []}
    tf = lambda ms, f=fl: f / ms / 1e9  # noqa: E731

    # ---- baselines: cuDNN and the solution's autotuned functions
    try:
        row["cudnn_fwd_ms"] = _do_bench(lambda: cudnn(q, k, v, causal), quick)
    except Exception as exc:  # noqa: BLE001
        row["cudnn_fwd_ms"], row["cudnn_error"] = None, _err_text(exc)
    sol_fwd, sol_bwd = ks["l04"]["flash_attention"], ks["l05"]["flash_attention_backward"]
    o, lse = sol_fwd(q, k, v, causal)  # autotunes here
    row["sol_fwd_cfg"] = cfg_tuple(getattr(ks["l04"]["flash_fwd_kernel"], "best_config", None))
    row["sol_fwd_ms"] = _do_bench(lambda: sol_fwd(q, k, v, causal), quick)
    inputs = [q, k, v, o, lse, do, causal]
    ref_dq, ref_dk, ref_dv = sol_bwd(*inputs)  # autotunes here
    row["sol_dkdv_cfg"] = cfg_tuple(getattr(ks["l05"]["dkdv_kernel"], "best_config", None))
    row["sol_dq_cfg"] = cfg_tuple(getattr(ks["l05"]["dq_kernel"], "best_config", None))
    row["sol_bwd_ms"] = _do_bench(lambda: sol_bwd(*inputs), quick)
    try:
        cudnn_bwd = sdpa_backward_of(inputs, cudnn)
        row["cudnn_bwd_ms"] = _do_bench(cudnn_bwd, quick)
    except Exception as exc:  # noqa: BLE001
        cudnn_bwd, row["cudnn_bwd_ms"] = None, None
        row["cudnn_bwd_error"] = _err_text(exc)
    delta = torch.empty((B, H, N), dtype=torch.float32, device=device)
    launch_delta(ks["delta"], o, do, delta)
    row["delta_ms"] = _do_bench(lambda: launch_delta(ks["delta"], o, do, delta), quick)

    # ---- candidates, each first compared with the solution's output at this shape
    def run_candidates(kind, make_call, compare):
        for variant in variants[kind]:
            for cfg in cands[kind]:
                rec = {"variant": variant, "cfg": cfg}
                row[kind].append(rec)
                if not supported(kind, cfg, causal, variant):
                    rec["status"] = "unsupported: with a causal mask the outer block must be a multiple of the inner"
                    continue
                if time.monotonic() > deadline:
                    rec["status"] = "skipped: time budget"
                    continue
                call = make_call(ks["kernels"][(kind, variant)], cfg)
                try:
                    call()
                    torch.cuda.synchronize()
                    rec["rel_vs_solution"] = err = compare()
                    if not (err <= SAME_AS_SOLUTION_TOL):
                        rec["status"] = f"wrong: rel error {err:.1e} vs the solution"
                        continue
                    rec["ms"] = _do_bench(call, quick)
                    rec["status"] = "ok"
                except Exception as exc:  # noqa: BLE001 - OutOfResources (shared memory), compile errors
                    rec["status"] = "failed: " + _err_text(exc)
                    torch.cuda.synchronize()
        ok = [r for r in row[kind] if r.get("status") == "ok"]
        best = min(ok, key=lambda r: r["ms"]) if ok else None
        log(f"  D={D} N={N} causal={causal} {kind}: {len(ok)}/{len(row[kind])} ok"
            + (f", best {best['variant']} {_c(best['cfg'])} {best['ms']:.3f} ms" if best else ""))

    o2, lse2 = torch.empty_like(q), torch.empty_like(lse)
    run_candidates("fwd", lambda kern, cfg: (lambda: launch_fwd(kern, q, k, v, o2, lse2, causal, cfg)),
                   lambda: max(rel_error_on_device(o2, o), rel_error_on_device(lse2, lse)))
    del o2, lse2
    dk2, dv2 = torch.empty_like(q), torch.empty_like(q)
    run_candidates("dkdv", lambda kern, cfg: (lambda: launch_dkdv(kern, q, k, v, do, lse, delta, dk2, dv2, causal,
                                                                  cfg)),
                   lambda: max(rel_error_on_device(dk2, ref_dk), rel_error_on_device(dv2, ref_dv)))
    del dk2, dv2
    dq2 = torch.empty_like(q)
    run_candidates("dq", lambda kern, cfg: (lambda: launch_dq(kern, q, k, v, do, lse, delta, dq2, causal, cfg)),
                   lambda: rel_error_on_device(dq2, ref_dq))
    del dq2

    # ---- bests, ratios
    for kind in ("fwd", "dkdv", "dq"):
        ok = [r for r in row[kind] if r.get("status") == "ok"]
        row[f"best_{kind}"] = min(ok, key=lambda r: r["ms"]) if ok else None
        for variant in variants[kind]:
            okv = [r for r in ok if r["variant"] == variant]
            row[f"best_{kind}_{variant}"] = min(okv, key=lambda r: r["ms"]) if okv else None
        sol_cfg = row["sol_dkdv_cfg" if kind == "dkdv" else "sol_dq_cfg" if kind == "dq" else "sol_fwd_cfg"]
        row[f"sol_{kind}_fixed_ms"] = next((r["ms"] for r in ok if r["variant"] == "solution" and r["cfg"] == sol_cfg),
                                           None)
    cf, cb = row["cudnn_fwd_ms"], row["cudnn_bwd_ms"]
    bf = row["best_fwd"]
    row["fwd_best_vs_cudnn"] = cf / bf["ms"] if (cf and bf) else None
    row["fwd_sol_vs_cudnn"] = cf / row["sol_fwd_ms"] if cf else None
    if row["best_dkdv"] and row["best_dq"]:
        row["bwd_best_ms"] = row["delta_ms"] + row["best_dkdv"]["ms"] + row["best_dq"]["ms"]
        row["bwd_best_vs_cudnn"] = cb / row["bwd_best_ms"] if cb else None
    row["bwd_sol_vs_cudnn"] = cb / row["sol_bwd_ms"] if cb else None
    for variant in variants["dkdv"]:  # the best pair with both kernels of one variant
        a, b = row.get(f"best_dkdv_{variant}"), row.get(f"best_dq_{variant}")
        if a and b and cb:
            row[f"bwd_{variant}_only_vs_cudnn"] = cb / (row["delta_ms"] + a["ms"] + b["ms"])

    # ---- confirmation with the course timer, interleaved with cuDNN and the solution (as the lesson 08 bench)
    rounds = 2 if quick else 3
    if time.monotonic() < deadline and bf and cf:
        best_fwd = fwd_fixed(ks, bf["variant"], bf["cfg"])
        ms = interleaved({"best": lambda: best_fwd(q, k, v, causal), "solution": lambda: sol_fwd(q, k, v, causal),
                          "cuDNN": lambda: cudnn(q, k, v, causal)}, rounds)
        row["confirm_fwd_ms"] = {n: ms[n] for n in ("best", "solution", "cuDNN")}
        row["confirm_fwd_best_vs_cudnn"] = ms["cuDNN"] / ms["best"]
        row["confirm_fwd_sol_vs_cudnn"] = ms["cuDNN"] / ms["solution"]
    if time.monotonic() < deadline and row.get("bwd_best_ms") and cudnn_bwd is not None:
        a, b = row["best_dkdv"], row["best_dq"]
        best_bwd = bwd_fixed(ks, a["variant"], a["cfg"], b["variant"], b["cfg"])
        got = best_bwd(*inputs)
        row["confirm_bwd_rel_vs_solution"] = max(rel_error_on_device(x, y) for x, y in zip(got, (ref_dq, ref_dk, ref_dv)))
        del got
        ms = interleaved({"best": lambda: best_bwd(*inputs), "solution": lambda: sol_bwd(*inputs),
                          "cuDNN": cudnn_bwd}, rounds)
        row["confirm_bwd_ms"] = {n: ms[n] for n in ("best", "solution", "cuDNN")}
        row["confirm_bwd_best_vs_cudnn"] = ms["cuDNN"] / ms["best"]
        row["confirm_bwd_sol_vs_cudnn"] = ms["cuDNN"] / ms["solution"]
    row["fwd_tflops"] = {"best": tf(bf["ms"]) if bf else None, "solution": tf(row["sol_fwd_ms"]),
                         "cuDNN": tf(cf) if cf else None}
    row["bwd_tflops"] = {"best": tf(row["bwd_best_ms"], bfl) if row.get("bwd_best_ms") else None,
                         "solution": tf(row["sol_bwd_ms"], bfl), "cuDNN": tf(cb, bfl) if cb else None}
    del q, k, v, do, o, lse, inputs, ref_dq, ref_dk, ref_dv, delta
    cudnn_bwd = None
    torch.cuda.empty_cache()
    return row


def _c(cfg) -> str:
    return "-" if cfg is None else "{}x{} w{} s{}".format(*cfg)


def _r(x, fmt="{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def print_tables(rows, log=print) -> None:
    log("")
    log("FORWARD (do_bench): best fixed config vs cuDNN; the solution's autotuned function; confirm = course timer")
    log(f"{'D':>3} {'N':>5} {'c':>1} | {'best (variant cfg)':<24} {'TF/s':>5} {'xcuDNN':>6} | {'solution autotuned':<16} "
        f"{'TF/s':>5} {'xcuDNN':>6} | {'cuDNN TF/s':>10} | confirm best/sol")
    for r in rows:
        b = r.get("best_fwd")
        log(f"{r['D']:>3} {r['N']:>5} {'y' if r['causal'] else 'n'} | "
            f"{(b['variant'][:4] + ' ' + _c(b['cfg'])) if b else '-':<24} {_r(r['fwd_tflops']['best'], '{:.0f}'):>5} "
            f"{_r(r.get('fwd_best_vs_cudnn')):>6} | {_c(r.get('sol_fwd_cfg')):<16} "
            f"{_r(r['fwd_tflops']['solution'], '{:.0f}'):>5} {_r(r.get('fwd_sol_vs_cudnn')):>6} | "
            f"{_r(r['fwd_tflops']['cuDNN'], '{:.0f}'):>10} | {_r(r.get('confirm_fwd_best_vs_cudnn'))} / "
            f"{_r(r.get('confirm_fwd_sol_vs_cudnn'))}")
    log("")
    log("BACKWARD per kernel (do_bench ms): best per variant; the solution's autotuned pick, timed fixed")
    for kind in ("dkdv", "dq"):
        log(f"  {kind}: {'D':>3} {'N':>5} {'c':>1} | {'solution best':<22} | {'split best':<22} | "
            f"{'solution autotuned':<22}")
        for r in rows:
            s, p = r.get(f"best_{kind}_solution"), r.get(f"best_{kind}_split")
            f = lambda x: (f"{_c(x['cfg'])} {x['ms']:.3f}" if x else "-")  # noqa: E731
            log(f"  {kind}: {r['D']:>3} {r['N']:>5} {'y' if r['causal'] else 'n'} | {f(s):<22} | {f(p):<22} | "
                f"{_c(r.get(f'sol_{kind}_cfg'))} {_r(r.get(f'sol_{kind}_fixed_ms'), '{:.3f}')}")
    log("")
    log("BACKWARD total (delta + best dK/dV + best dQ) vs cuDNN backward; confirm = course timer, interleaved")
    log(f"{'D':>3} {'N':>5} {'c':>1} | {'dkdv':<22} {'dq':<22} {'TF/s':>5} {'xcuDNN':>6} {'split-only':>10} | "
        f"{'sol TF/s':>8} {'xcuDNN':>6} | confirm best/sol")
    for r in rows:
        a, b = r.get("best_dkdv"), r.get("best_dq")
        f = lambda x: (x["variant"][:5] + " " + _c(x["cfg"])) if x else "-"  # noqa: E731
        log(f"{r['D']:>3} {r['N']:>5} {'y' if r['causal'] else 'n'} | {f(a):<22} {f(b):<22} "
            f"{_r(r['bwd_tflops']['best'], '{:.0f}'):>5} {_r(r.get('bwd_best_vs_cudnn')):>6} "
            f"{_r(r.get('bwd_split_only_vs_cudnn')):>10} | {_r(r['bwd_tflops']['solution'], '{:.0f}'):>8} "
            f"{_r(r.get('bwd_sol_vs_cudnn')):>6} | {_r(r.get('confirm_bwd_best_vs_cudnn'))} / "
            f"{_r(r.get('confirm_bwd_sol_vs_cudnn'))}")


def summarize(rows) -> dict:
    """The configurations that win somewhere (what a new config list must keep), per kernel and variant."""
    out = {}
    for kind in ("fwd", "dkdv", "dq"):
        wins = {}
        for r in rows:
            b = r.get(f"best_{kind}")
            if b:
                wins.setdefault(f"{b['variant']} {_c(b['cfg'])}", []).append(
                    f"D{r['D']} N{r['N']}{' causal' if r['causal'] else ''}")
        out[kind] = wins
    conf = lambda key: [r.get(key) for r in rows if r.get(key) is not None]  # noqa: E731
    out["min_ratio"] = {k: (min(conf(k)) if conf(k) else None) for k in (
        "fwd_best_vs_cudnn", "fwd_sol_vs_cudnn", "bwd_best_vs_cudnn", "bwd_sol_vs_cudnn", "confirm_fwd_best_vs_cudnn",
        "confirm_fwd_sol_vs_cudnn", "confirm_bwd_best_vs_cudnn", "confirm_bwd_sol_vs_cudnn")}
    return out


def gpu_sweep(args) -> int:
    t0 = time.monotonic()
    log = lambda s: print(f"[{time.monotonic() - t0:6.1f}s] {s}", flush=True)  # noqa: E731
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("0", ""):
        print("No GPU (or TRITON_INTERPRET is set): use --cpu-check here.")
        return 2
    out_dir = pathlib.Path(args.out or os.environ.get("OUT") or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    deadline = t0 + args.budget_s
    quick = args.quick
    grid = QUICK_GRID if quick else GRID
    if args.shapes:
        want = {tuple(int(x) for x in s.split(":")) for s in args.shapes.split(",")}
        grid = [g for g in GRID if (g[0], g[1], int(g[2])) in want]
    cands = {"fwd": FWD_CANDIDATES, "dkdv": DKDV_CANDIDATES, "dq": DQ_CANDIDATES}
    if quick:
        cands = QUICK_PICK
    variants = {"fwd": ["solution"] + ([] if args.no_fwd_variant else ["lazy"]),
                "dkdv": ["solution", "split"], "dq": ["solution", "split"]}
    res = {"script": "scripts/attention_sweep.py", "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "gpu": torch.cuda.get_device_name(0), "capability": list(torch.cuda.get_device_capability(0)),
           "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(), "quick": quick,
           "grid": grid, "candidates": cands, "variants": variants, "budget_s": args.budget_s,
           "timer": "triton.testing.do_bench median (warmup/rep ms: %s); confirm_*: kernellab.timing.interleaved "
                    "(course timer, L2 flushed, launch hidden), as kernellab/lessons/l08_hopper/bench.py"
                    % ("5/20" if quick else "10/40")}
    out_file = out_dir / "attention_sweep.json"

    def save():
        out_file.write_text(json.dumps(res, indent=1, default=str))

    log(f"{res['gpu']} sm_{res['capability'][0]}{res['capability'][1]}, torch {res['torch']}, triton {res['triton']}, "
        f"{len(grid)} shapes, candidates fwd {len(cands['fwd'])}x{len(variants['fwd'])}, dkdv "
        f"{len(cands['dkdv'])}x2, dq {len(cands['dq'])}x2; writing {out_file}")
    ks = load_kernels()
    log("solutions loaded")

    # ---- compile everything in parallel first
    keys = sorted({(D, c) for D, _, c in grid})
    check_shapes = [s for s in CHECK_SHAPES if (s[3], s[4]) in keys] if not args.skip_check else []
    check_which = {(kind, variant): CHECK_CONFIGS[kind] for kind in ("fwd", "dkdv", "dq")
                   for variant in variants[kind] if variant != "solution"}
    tasks = []
    for D, c in keys:
        spec = (H_GRID, 1024, D, c)  # N = 1024, 4096, 16384 share one specialisation (multiples of 16)
        tasks.append(("delta", "solution", None, spec))
        for kind in ("fwd", "dkdv", "dq"):
            for variant in variants[kind]:
                tasks += [(kind, variant, cfg, spec) for cfg in cands[kind] if supported(kind, cfg, c, variant)]
    for B, H, N, D, c, *_ in check_shapes:
        if N in (1, 37):  # N = 1 and odd N: two specialisations (37, 129 and 300 share one)
            tasks.append(("delta", "solution", None, (H, N, D, c)))
            tasks += [(kind, variant, cfg, (H, N, D, c)) for (kind, variant), cfgs in check_which.items()
                      for cfg in cfgs if supported(kind, cfg, c, variant)]
    tasks = list(dict.fromkeys(tasks))
    log(f"expected wall time: ~1 min compiling {len(tasks)} kernels in {args.workers} processes, "
        f"~{'1' if quick else '3-4'} min timing; remaining candidates are skipped after {args.budget_s:.0f} s")
    if args.workers > 0:
        res["precompile"] = precompile(tasks, args.workers, log)
    save()

    # ---- correctness of the variants at small, odd shapes on this GPU
    if check_shapes:
        log(f"checking the variants at {len(check_shapes)} small shapes (float32 reference)")
        chk = check_kernels(ks, check_which, check_shapes, "cuda", log=lambda s: None)
        print_check(chk, log)
        res["gpu_check"] = {f"{k[0]} {k[1]}": v for k, v in chk.items()}
        for (kind, variant), r in chk.items():
            if not r["ok"]:
                log(f"  {kind} variant {variant} FAILED its correctness check: it is not timed")
                variants[kind].remove(variant)
        save()

    # ---- the grid
    per_shape = max(1.0, (deadline - time.monotonic()) / max(1, len(grid)))
    log(f"sweeping {len(grid)} shapes; budget left {deadline - time.monotonic():.0f} s (~{per_shape:.0f} s a shape)")
    rows = res["rows"] = []
    for i, (D, N, causal) in enumerate(grid):
        ts = time.monotonic()
        if ts > deadline:
            log(f"[{i + 1}/{len(grid)}] D={D} N={N} causal={causal}: skipped, time budget spent")
            rows.append({"D": D, "N": N, "causal": causal, "error": "skipped: time budget (--budget-s)"})
            continue
        try:
            row = sweep_shape(ks, D, N, causal, cands, variants, quick, log, deadline)
        except Exception as exc:  # noqa: BLE001
            log(f"  shape D={D} N={N} causal={causal} failed: {_err_text(exc)}")
            rows.append({"D": D, "N": N, "causal": causal, "error": traceback.format_exc()[-2000:]})
            torch.cuda.empty_cache()
            save()
            continue
        rows.append(row)
        save()
        skipped = sum(1 for kind in ("fwd", "dkdv", "dq") for r in row[kind] if r.get("status", "").startswith("skip"))
        log(f"[{i + 1}/{len(grid)}] D={D} N={N} causal={causal}: {time.monotonic() - ts:.1f} s; fwd best x cuDNN "
            f"{_r(row.get('fwd_best_vs_cudnn'))} (solution {_r(row.get('fwd_sol_vs_cudnn'))}), bwd best x cuDNN "
            f"{_r(row.get('bwd_best_vs_cudnn'))} (solution {_r(row.get('bwd_sol_vs_cudnn'))}); confirm fwd/bwd "
            f"{_r(row.get('confirm_fwd_best_vs_cudnn'))}/{_r(row.get('confirm_bwd_best_vs_cudnn'))}"
            + (f"; {skipped} candidates skipped (budget)" if skipped else ""))
    good = [r for r in rows if "error" not in r]
    print_tables(good, log)
    res["summary"] = summarize(good)
    res["wall_s"] = time.monotonic() - t0
    save()
    log("")
    log("winning configurations per kernel: " + json.dumps(res["summary"], default=str, indent=1))
    log(f"done in {res['wall_s']:.0f} s; wrote {out_file}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-check", action="store_true", help="small-shape correctness only, CPU interpreter")
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 shapes, 3 configurations per kernel")
    ap.add_argument("--shapes", default="", help="only these grid shapes, e.g. 128:4096:0,64:16384:1 (D:N:causal)")
    ap.add_argument("--out", default="", help="output folder (default $OUT, else .)")
    ap.add_argument("--workers", type=int, default=max(1, min(14, (os.cpu_count() or 4) - 2)),
                    help="processes compiling in parallel before the sweep (0: compile on first use)")
    ap.add_argument("--budget-s", type=float, default=400.0,
                    help="after this many seconds (from the start) remaining candidates and shapes are skipped")
    ap.add_argument("--no-fwd-variant", action="store_true", help="do not build or time the 'lazy' forward")
    ap.add_argument("--skip-check", action="store_true", help="skip the small-shape GPU correctness check")
    args = ap.parse_args()
    if args.cpu_check:
        return cpu_check(args)
    return gpu_sweep(args)


if __name__ == "__main__":
    sys.exit(main())
