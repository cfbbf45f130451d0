"""What lessons 04 and 05 share (and lesson 06 its FLOP count): attention's references, the naive and
SDPA baselines, the graded cases, and the timed shapes."""
from __future__ import annotations

import math

import torch

from ..problems.base import Case


def attention_naive(q, k, v, causal: bool = False):
    """Attention as eager PyTorch writes it: the N x N scores and probabilities live in memory."""
    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


def attention_sdpa(q, k, v, causal: bool = False):
    """PyTorch's fused attention, with the backend PyTorch picks for this GPU and shape."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def sdpa_on(*backends):
    """SDPA restricted to ``backends`` (torch.nn.attention.SDPBackend members): it picks among them only, and
    raises if none can run here. Only the forward needs the restriction: autograd runs the backward that
    belongs to the forward it recorded."""
    from torch.nn.attention import sdpa_kernel

    def attend(q, k, v, causal: bool = False):
        with sdpa_kernel(list(backends)):
            return attention_sdpa(q, k, v, causal)
    return attend


def attention_sdpa_flash(q, k, v, causal: bool = False):
    """SDPA without its cuDNN backend: FlashAttention-2 where the GPU has it (sm_80+), else the
    memory-efficient kernel (a T4). The speed checks' baseline: the same algorithm as the lesson's, in CUDA.
    (On an H100 PyTorch 2.11 itself picks cuDNN, whose Hopper-only TMA and warp specialisation a
    T4-portable Triton kernel does not use; the lesson shows that comparison ungraded.)"""
    from torch.nn.attention import SDPBackend
    return sdpa_on(SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)(q, k, v, causal)


def _scores(q, k, causal):
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return s


def attention_reference(q, k, v, causal: bool, dtype=torch.float64):
    """(output, log-sum-exp of the scaled scores) in ``dtype``, one (batch, head) slice at a time so that
    only one N x N matrix exists at once."""
    B, H, N, D = q.shape
    o = torch.empty(B, H, N, D, dtype=dtype, device=q.device)
    lse = torch.empty(B, H, N, dtype=dtype, device=q.device)
    for b in range(B):
        for h in range(H):
            s = _scores(q[b, h].to(dtype), k[b, h].to(dtype), causal)
            lse[b, h] = torch.logsumexp(s, dim=-1)
            o[b, h] = torch.softmax(s, dim=-1) @ v[b, h].to(dtype)
    return o, lse


def attention_grads_reference(q, k, v, do, causal: bool, dtype=torch.float64):
    """(dQ, dK, dV) by autograd through the reference, one (batch, head) slice at a time."""
    grads = [torch.empty(q.shape, dtype=dtype, device=q.device) for _ in range(3)]
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            qq, kk, vv = (t[b, h].to(dtype).requires_grad_() for t in (q, k, v))
            o = torch.softmax(_scores(qq, kk, causal), dim=-1) @ vv
            for g, d in zip(grads, torch.autograd.grad(o, (qq, kk, vv), do[b, h].to(dtype))):
                g[b, h] = d
    return tuple(grads)


# ------------------------------------------------------------------ graded cases
def qkv(gen, B, H, N, D, layout="bhnd", n=3, device="cpu"):
    """``n`` random fp16 tensors of shape (B, H, N, D); layout "bnhd" gives non-contiguous views of
    (B, N, H, D) tensors, the layout a projection followed by .view(B, N, H, D).transpose(1, 2) gives."""
    out = []
    for _ in range(n):
        if layout == "bnhd":
            out.append(torch.randn(B, N, H, D, generator=gen, device=device).half().transpose(1, 2))
        else:
            out.append(torch.randn(B, H, N, D, generator=gen, device=device).half())
    return out


def tags_for(N, causal, layout):
    # key_tail: keys >= N exist and no causal mask hides them (a missing key mask shows only there)
    on = {"strided": layout == "bnhd", "causal": causal, "key_tail": N % 64 != 0 and not causal, "tail": N % 64 != 0,
          "one_block": N <= 16, "several_blocks": N > 128}
    return tuple(t for t, yes in on.items() if yes)


def label_for(B, H, N, D, causal, layout):
    return (f"B={B} H={H} N={N} D={D}{', causal' if causal else ''}"
            + (", non-contiguous (B, N, H, D) views" if layout == "bnhd" else ""))


def shapes(gen, on_gpu: bool) -> list[tuple]:
    """(B, H, N, D, causal, layout) of the graded cases: one-block and many-block lengths, N not a multiple
    of any block, every head dim, causal or not, strided views, and two random shapes from the seed."""
    big = on_gpu
    fixed = [(1, 1, 1, 16, False, "bhnd"), (2, 2, 7, 32, True, "bhnd"),
             (1, 2, 256, 64, False, "bhnd"), (1, 2, 256, 64, True, "bhnd"),
             (2, 1, 200, 64, False, "bhnd"), (1, 2, 300, 128, True, "bhnd"),
             (1, 2, 129, 16, False, "bhnd"), (1, 3, 192, 32, True, "bnhd"),
             (1, 2, 256, 64, False, "bnhd")]
    if big:
        fixed += [(2, 4, 1000, 64, True, "bhnd"), (1, 4, 2048, 128, False, "bhnd"), (2, 2, 1537, 32, True, "bnhd")]
    for _ in range(2):
        N = int(torch.randint(130, 2000 if big else 400, (1,), generator=gen))
        D = [16, 32, 64, 128][int(torch.randint(4, (1,), generator=gen))]
        causal = bool(torch.randint(2, (1,), generator=gen))
        fixed.append((int(torch.randint(1, 3, (1,), generator=gen)), 2, N, D, causal, "bhnd"))
    return fixed


def forward_case(gen, B, H, N, D, causal, layout) -> Case:
    q, k, v = qkv(gen, B, H, N, D, layout)
    return Case(label_for(B, H, N, D, causal, layout), [q, k, v, causal], tags=tags_for(N, causal, layout))


# A log-sum-exp is judged against a scale of at least 1 (CorrectnessProblem.norm_floor): its rounding error follows
# the scores (about 1), not its own value, which one key (N = 1) can put near 0.
LSE_FLOOR = {"lse": 1.0}

HINTS = {
    "strided": ("It is wrong only for the non-contiguous inputs: address q, k and v with their own strides "
                "(q.stride(0), q.stride(1), q.stride(2)), not with N * D."),
    "causal": ("It is wrong only when causal: key j is visible to query i when j <= i. Check the diagonal "
               "block's mask (<=, not <) and that the loop visits the diagonal block itself."),
    "key_tail": ("It is wrong only when N is not a multiple of the block and attention is not causal (a causal "
                 "mask hides keys >= N anyway): keys >= N must get the score -inf (a masked load of K with other=0 "
                 "gives a score of 0, which is not -inf)."),
    "tail": ("It is wrong only when N is not a multiple of the block: keys >= N must get the score -inf (a "
             "masked load of K with other=0 gives a score of 0, which is not -inf), and rows >= N must not be "
             "stored."),
    "several_blocks": ("It is right when every key fits in one block and wrong with several: when a new block "
                       "raises the running max, rescale the accumulator and the running sum by "
                       "exp(m_old - m_new) before adding the new block."),
}


# ------------------------------------------------------------------ timing helpers
def attention_flops(B, H, N, D, causal, backward=False) -> float:
    """Two matmuls of 2 N^2 D per head forward (QK^T, PV), five backward; causal does half."""
    f = 4.0 * B * H * N * N * D * (0.5 if causal else 1.0)
    return f * 2.5 if backward else f


def peak_extra_bytes(fn, *args) -> int | None:
    """Bytes the CUDA allocator's peak rose by during ``fn(*args)``; None if it ran out of memory."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    try:
        out = fn(*args)
        torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None
    peak = torch.cuda.max_memory_allocated() - before
    del out
    return peak
