"""Lesson 09: decode attention - one new query per sequence against its KV cache. Memory-bound (a few FLOPs per
byte of cache), so the keys are split over programs (split-KV) and the pieces merged by their log-sum-exps; the
cache may be paged (a block table per sequence); several query heads share a KV head (grouped-query attention).

Triton's CPU interpreter and the block table: checked on triton 3.9.0 (torch 2.13 CPU, 2026-11-28), a kernel
that loads page ids from a table and then loads keys through pointers computed from them (a gather, one page id
per key row, in 1-D and 2-D tiles) runs in the interpreter and gives the same values as indexing in PyTorch; the
lesson's paged problem is therefore graded in the interpreter too. (The course design's note "the interpreter
has no indirect loads" does not hold on this triton.)
"""
from __future__ import annotations

import math

import torch

from ... import learner
from ...device import DEVICE
from ...problems.base import Answer, AnswersProblem, Case, CorrectnessProblem, SpeedProblem

LESSON = "09_serve_it"

# ------------------------------------------------------------------ numeric answers: one decode step
ANSWER_SHAPE = {"B": 32, "HQ": 32, "HKV": 8, "D": 128, "CTX": 8192}


def decode_bytes(B, hkv, ctx_total, D, elem=2) -> int:
    """Bytes of K and V one decode step reads: every cached key and value row of every KV head, once."""
    return 2 * ctx_total * hkv * D * elem


def decode_flops(hq, ctx_total, D) -> int:
    """q.k and p.v for every query head and cached position: 2 * 2 * D FLOPs each."""
    return 4 * hq * ctx_total * D


def _decode_answers(facts):
    B, hq, hkv, D, ctx = (ANSWER_SHAPE[k] for k in ("B", "HQ", "HKV", "D", "CTX"))
    b, f = decode_bytes(B, hkv, B * ctx, D), decode_flops(hq, B * ctx, D)
    return [
        Answer("DECODE_BYTES", b, explain=(
            "Count what one step must read: every cached position of every sequence, in every KV head, holds a key "
            "and a value of D fp16 numbers each. The query and the output are a rounding error next to the cache.")),
        Answer("DECODE_FLOPS", f, explain=(
            "Per query head and cached position: a dot product of q with the key, then the value scaled into the "
            "output; a multiply-add counts as two FLOPs.")),
        Answer("DECODE_INTENSITY", f / b, rel_tol=0.03, explain=(
            "FLOPs over bytes. Write both in terms of the cache's size and see what is left: it depends on how many "
            "query heads share one KV head.")),
        Answer("DECODE_BOUND", facts["bound"](f / b), explain="Compare the intensity with this GPU's ridge point."),
    ]


ANSWERS = AnswersProblem("answers_decode", 2, ("DECODE_BYTES", "DECODE_FLOPS", "DECODE_INTENSITY", "DECODE_BOUND"),
                         "one decode step by the numbers", answers=_decode_answers)


# ------------------------------------------------------------------ references
def decode_reference(q, k, v, seq_lens, dtype=torch.float64, block_table=None):
    """(output, lse) of one query per sequence against its first seq_lens[b] keys, in ``dtype``; query head hq
    reads KV head hq // (HQ / HKV). ``block_table``: k and v are pages (n_pages, PAGE, HKV, D)."""
    B, hq, D = q.shape
    o = torch.empty(B, hq, D, dtype=dtype, device=q.device)
    lse = torch.empty(B, hq, dtype=dtype, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        kb, vb = (_rows(t, b, n, block_table) for t in (k, v))  # (HKV, n, D)
        hkv = kb.shape[0]
        qb = q[b].to(dtype).view(hkv, hq // hkv, D)
        s = torch.einsum("hgd,hnd->hgn", qb, kb.to(dtype)) / math.sqrt(D)
        lse[b] = torch.logsumexp(s, -1).reshape(hq)
        o[b] = torch.einsum("hgn,hnd->hgd", torch.softmax(s, -1), vb.to(dtype)).reshape(hq, D)
    return o, lse


def _rows(t, b, n, block_table):
    if block_table is None:
        return t[b, :, :n]
    page = t.shape[1]
    ids = block_table[b, :(n + page - 1) // page].long().to(t.device)
    return t[ids].reshape(-1, t.shape[2], t.shape[3])[:n].transpose(0, 1)


def merge_reference(o_parts, lse_parts):
    """Partial outputs and their lse merged, in float64: splits with lse = -inf count for nothing."""
    lse = torch.logsumexp(lse_parts.double(), 0)
    w = torch.exp(lse_parts.double() - lse)
    o = torch.where(w[..., None] > 0, o_parts.double(), 0.0)
    return (o * w[..., None]).sum(0), lse


def _wrong_gqa_pairing(case):
    """The classic GQA mistake: query head hq paired with KV head hq % HKV instead of hq // (HQ / HKV)."""
    q, k, v, lens = case.inputs
    hkv, hq = k.shape[1], q.shape[1]
    idx = torch.arange(hq) % hkv
    order = torch.argsort(idx, stable=True)  # heads grouped by their (wrong) KV head, in the reference's order
    o, lse = decode_reference(q[:, order], k, v, lens)
    back = torch.argsort(order)
    return o[:, back], lse[:, back]


# ------------------------------------------------------------------ graded cases
def _lengths(gen, B, n_max):
    """Per-sequence lengths in 1 .. n_max: the longest is n_max, the shortest 1 (when B > 1), the rest random."""
    lens = torch.randint(1, n_max + 1, (B,), generator=gen)
    lens[0] = n_max
    if B > 1:
        lens[-1] = 1
    return lens.to(torch.int32)


def cache(gen, B, hq, hkv, n_max, D, lens):
    """q (B, HQ, D) and a contiguous cache (B, HKV, N_MAX, D), fp16; positions past a sequence's length hold NaN,
    as a serving engine's never-written cache slots hold whatever was there."""
    q = torch.randn(B, hq, D, generator=gen).half()
    k = torch.randn(B, hkv, n_max, D, generator=gen).half()
    v = torch.randn(B, hkv, n_max, D, generator=gen).half()
    for b in range(B):
        k[b, :, int(lens[b]):] = float("nan")
        v[b, :, int(lens[b]):] = float("nan")
    return q, k, v


def page_cache(gen, k, v, lens, page):
    """The same cache in pages (n_pages, PAGE, HKV, D), shuffled, with a block table (B, max_pages) int32; table
    entries past a sequence's pages name real pages of other sequences (a kernel must stop at seq_lens)."""
    B, hkv, n_max, D = k.shape
    per = (n_max + page - 1) // page
    n_pages = B * per + 3
    ids = torch.randperm(n_pages, generator=gen)[:B * per].view(B, per).to(torch.int32)
    kp = torch.full((n_pages, page, hkv, D), float("nan"), dtype=k.dtype)
    vp = kp.clone()
    for b in range(B):
        for j in range(per):
            lo, hi = j * page, min((j + 1) * page, n_max)
            kp[ids[b, j], :hi - lo] = k[b, :, lo:hi].transpose(0, 1)
            vp[ids[b, j], :hi - lo] = v[b, :, lo:hi].transpose(0, 1)
    table = ids.clone()
    for b in range(B):  # slots past the sequence's last page: someone else's pages
        used = (int(lens[b]) + page - 1) // page
        table[b, used:] = ids[(b + 1) % B, :per - used]
    return kp, vp, table


def _tags(B, hq, hkv, n_max, lens):
    on = {"gqa": hq != hkv, "one_key": int(lens.min()) == 1, "tail": any(int(x) % 16 for x in lens),
          "padding": any(int(x) < n_max for x in lens), "long": n_max > 1000}
    return tuple(t for t, yes in on.items() if yes)


def _label(B, hq, hkv, n_max, D, lens, page=None):
    shown = ", ".join(str(int(x)) for x in lens[:4]) + (", ..." if len(lens) > 4 else "")
    return (f"B={B} HQ={hq} HKV={hkv} D={D} cache {n_max}, seq_lens [{shown}]"
            + (f", pages of {page}" if page else ""))


def decode_case(gen, B, hq, hkv, n_max, D, k_first=False) -> Case:
    lens = _lengths(gen, B, n_max)
    q, k, v = cache(gen, B, hq, hkv, n_max, D, lens)
    inputs = [k, q, v, lens] if k_first else [q, k, v, lens]
    return Case(_label(B, hq, hkv, n_max, D, lens), inputs, tags=_tags(B, hq, hkv, n_max, lens))


def _random_shape(gen, big):
    hkv = [1, 2, 4][int(torch.randint(3, (1,), generator=gen))]
    group = [1, 2, 4, 8][int(torch.randint(4, (1,), generator=gen))]
    D = [16, 32, 64, 128][int(torch.randint(4, (1,), generator=gen))]
    n = int(torch.randint(17, 3000 if big else 400, (1,), generator=gen))
    return int(torch.randint(1, 4, (1,), generator=gen)), hkv * group, hkv, n, D


def decode_shapes(gen, on_gpu):
    """(B, HQ, HKV, N_MAX, D): a single key, lengths that are not multiples of any block, every head dim, one
    to eight query heads per KV head, and two random shapes from the seed."""
    fixed = [(1, 1, 1, 1, 16), (2, 4, 4, 100, 64), (3, 8, 2, 257, 32), (2, 8, 1, 130, 128), (1, 2, 1, 64, 16)]
    if on_gpu:
        fixed += [(4, 4, 2, 300, 64), (8, 32, 8, 4000, 128), (3, 16, 2, 9000, 64)]
    return fixed + [_random_shape(gen, on_gpu) for _ in range(2 if on_gpu else 1)]


def _decode_cases(gen, on_gpu):
    return [decode_case(gen, *s) for s in decode_shapes(gen, on_gpu)]


def _long_cases(gen, on_gpu):
    # on the CPU one case: two sequences over several splits (the interpreter pays for every key block)
    shapes = [(1, 32, 8, 70000, 128), (2, 8, 1, 40000, 64)] if on_gpu else [(2, 8, 2, 2000, 32)]
    return [decode_case(gen, *s) for s in shapes]


def _reads_cases(gen, on_gpu):
    return [decode_case(gen, *s, k_first=True) for s in [(2, 8, 2, 200, 32), (1, 16, 2, 150, 64)]]


def _paged_cases(gen, on_gpu):
    shapes = [(2, 4, 4, 100, 64, 16), (3, 8, 2, 257, 32, 16), (1, 2, 1, 1, 16, 16), (2, 8, 1, 130, 128, 32)]
    if not on_gpu:  # the random shape below, kept short for the interpreter
        shapes = shapes[1:]
    if on_gpu:
        shapes += [(8, 32, 8, 4000, 128, 16), (2, 16, 2, 9000, 64, 32)]
    shapes += [(*_random_shape(gen, on_gpu), [16, 32][int(torch.randint(2, (1,), generator=gen))])]
    cases = []
    for B, hq, hkv, n_max, D, page in shapes:
        lens = _lengths(gen, B, n_max)
        q, k, v = cache(gen, B, hq, hkv, n_max, D, lens)
        kp, vp, table = page_cache(gen, k, v, lens, page)
        cases.append(Case(_label(B, hq, hkv, n_max, D, lens, page), [q, kp, vp, table, lens],
                          tags=_tags(B, hq, hkv, n_max, lens)))
    return cases


def _out_dtype(case):
    return torch.float16, torch.float32


def _q_of(case):
    return next(t for t in case.inputs if t.dim() == 3)  # q: (B, HQ, D), whichever argument it is


def _out_shape(case):
    q = _q_of(case)
    return tuple(q.shape), tuple(q.shape[:2])


def _reference(case):
    q, k, v, lens = case.inputs
    return decode_reference(q, k, v, lens)


def _reference_k_first(case):
    k, q, v, lens = case.inputs
    return decode_reference(q, k, v, lens)


def _paged_reference(case):
    q, kp, vp, table, lens = case.inputs
    return decode_reference(q, kp, vp, lens, block_table=table)


LSE_FLOOR = {"lse": 1.0}  # an lse's rounding follows the scores (about 1), not its own value (see lesson 04)

HINTS = {
    "gqa": ("It is wrong only where several query heads share a KV head: query head hq reads KV head "
            "hq // (HQ // HKV) (heads 0..G-1 share KV head 0), and q's head stride is not the cache's."),
    "padding": ("It is wrong only where a sequence is shorter than the cache: positions >= seq_lens[b] hold NaN "
                "here (never-written slots hold anything). Mask the loads of K and V with the sequence's own "
                "length, and give masked keys the score -inf (a masked load with other=0 gives a score of 0)."),
    "tail": ("It is wrong only where a length is not a multiple of the key block: mask the last, partial block "
             "(keys >= seq_lens[b] get the score -inf)."),
    "one_key": "It is wrong where a sequence has a single key: its output is that key's value row, its lse the score.",
    "long": ("It is right on short sequences and wrong on long ones: when the keys are split over programs, each "
             "split's lse and output must be merged with weights exp(lse_s - lse), and a split past the end of a "
             "sequence (lse = -inf) must count for nothing."),
}

SIGNATURE = "decode_attention(q, k_cache, v_cache, seq_lens)"
DECODE = CorrectnessProblem(
    "decode_attention_correct", 5, ("decode_attention",), "decode_attention(q, k_cache, v_cache, seq_lens)",
    signature=SIGNATURE, make_cases=_decode_cases, reference=_reference, out_dtype=_out_dtype, out_shape=_out_shape,
    hints=HINTS, outputs=("output", "lse"), norm_floor=LSE_FLOOR, tolerance_repeat=1e-6,
    mistakes=((_wrong_gqa_pairing, "Query head hq was paired with KV head hq % HKV; grouped-query attention "
               "pairs it with KV head hq // (HQ // HKV), so neighbouring query heads share one."),))

DECODE_LONG = CorrectnessProblem(
    "decode_long_correct", 2, ("decode_attention",), "decode_attention on long contexts (split-KV)",
    signature=SIGNATURE, make_cases=_long_cases, reference=_reference, out_dtype=_out_dtype, out_shape=_out_shape,
    hints=HINTS, outputs=("output", "lse"), norm_floor=LSE_FLOOR, tolerance_repeat=1e-6)


def _call_k_first(fn, k, q, v, lens):
    return fn(q, k, v, lens)


def _live_k_elements(case):
    k, _, _, lens = case.inputs
    return int(lens.sum()) * k.shape[1] * k.shape[3]


GQA_READS = CorrectnessProblem(
    "gqa_reads", 2, ("decode_attention",), "decode_attention: one load of K serves every head of its group",
    signature=SIGNATURE, make_cases=_reads_cases, reference=_reference_k_first, out_dtype=_out_dtype,
    out_shape=_out_shape, hints=HINTS, outputs=("output", "lse"), norm_floor=LSE_FLOOR, tolerance_repeat=1e-6,
    call=_call_k_first,
    # counted on k_cache (made the first input of these cases, where the read counter looks; the call passes it
    # to the function in its place). 1.25: room for a partial last block read whole, never for a second pass.
    max_reads=lambda c: int(1.25 * _live_k_elements(c)),
    reads_why=("With grouped-query heads the G query heads of a KV head use the same keys: load each K block once "
               "and multiply it by all G queries together (a G x D tile of q, padded to 16 rows for tl.dot). A "
               "program per query head reads the whole cache G times over."))

PAGED = CorrectnessProblem(
    "paged_decode_correct", 4, ("paged_decode_attention",),
    "paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens)",
    signature="paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens)", make_cases=_paged_cases,
    reference=_paged_reference, out_dtype=_out_dtype, out_shape=_out_shape, hints=HINTS, outputs=("output", "lse"),
    norm_floor=LSE_FLOOR, tolerance_repeat=1e-6)


# ------------------------------------------------------------------ the merge
def merge_case(gen, S, B, H, D, empty=0.0, spread=1.0) -> Case:
    """``S`` partial outputs (S, B, H, D) and lse (S, B, H), float32. ``empty``: the share of splits that saw no
    key (lse = -inf, output NaN: 0 / 0), never all of a row's; ``spread``: how far apart the lse lie."""
    o = torch.randn(S, B, H, D, generator=gen)
    lse = torch.randn(S, B, H, generator=gen) * spread
    gone = torch.rand(S, B, H, generator=gen) < empty
    gone[int(torch.randint(S, (1,), generator=gen))] = False  # one split of every row saw keys
    lse[gone] = -float("inf")
    o[gone] = float("nan")
    tags = tuple(t for t, yes in (("empty", bool(gone.any())), ("spread", spread > 50), ("many", S > 16)) if yes)
    return Case(f"S={S} B={B} H={H} D={D}" + (", empty splits" if empty else "") + (
        f", lse spread {spread:g}" if spread > 1 else ""), [o, lse], tags=tags)


def _merge_cases(gen, on_gpu):
    return [merge_case(gen, 1, 1, 1, 16), merge_case(gen, 4, 2, 3, 64), merge_case(gen, 8, 2, 2, 128, spread=500.0),
            merge_case(gen, 8, 3, 2, 32, empty=0.4), merge_case(gen, 40, 1, 4, 32, empty=0.5, spread=200.0),
            merge_case(gen, int(torch.randint(2, 30, (1,), generator=gen)), 2, 2, 64, empty=0.3, spread=100.0)]


MERGE_HINTS = {
    "empty": ("It is wrong only where some splits saw no key: their lse is -inf and their output is 0 / 0 (NaN "
              "here). Give them the weight 0 without ever multiplying their output (tl.where), and never compute "
              "-inf - (-inf)."),
    "spread": ("It is wrong only where the lse of the splits lie far apart: exp(lse_s) overflows float32 past 88. "
               "Subtract the row's largest lse before exponentiating: weights exp(lse_s - max) are all <= 1."),
    "many": "It is wrong only with many splits: loop over the splits in blocks, or size the block to cover them all.",
}

MERGE = CorrectnessProblem(
    "merge_correct", 3, ("merge_partials",), "merge_partials(o_parts, lse_parts)",
    signature="merge_partials(o_parts, lse_parts)", make_cases=_merge_cases,
    reference=lambda c: merge_reference(*c.inputs),
    out_dtype=lambda c: (torch.float32, torch.float32),
    out_shape=lambda c: (tuple(c.inputs[0].shape[1:]), tuple(c.inputs[0].shape[1:3])),
    hints=MERGE_HINTS, outputs=("output", "lse"), norm_floor=LSE_FLOOR)


# ------------------------------------------------------------------ speed
# 16 sequences of 1k-32k tokens, 32 query heads over 8 KV heads, D = 128, in a 32k cache: 1.1 GB of live cache
# (0.23 ms at an H200's 4.8 TB/s). The benchmark's batch is 32 sequences; graded at 16, because the judge holds
# three copies of the inputs (two input sets and the live one, 2.1 GB of padded cache each) besides the copy
# baseline's buffers, and that must fit a T4's 15 GB.
SPEED_SHAPE = {"B": 16, "HQ": 32, "HKV": 8, "N_MAX": 32768, "D": 128, "LO": 1024}


def spaced_lengths(B, lo, n_max) -> list[int]:
    """B lengths spread evenly over lo .. n_max. Timed inputs shuffle these: every input set then holds the same
    bytes of cache (independent draws would differ by about 10 % at B = 32, and the median time with them)."""
    return [lo + (n_max - lo) * i // max(1, B - 1) for i in range(B)]


def speed_inputs(B, hq, hkv, n_max, D, lo, gen, device):
    """q and a padded contiguous cache (B, HKV, N_MAX, D) with the spaced lengths from lo to N_MAX, shuffled. Random
    numbers come from ``gen`` where it lives on ``device`` (the judge's timed inputs: a CUDA generator), else from a
    generator there seeded by it (a notebook's CPU generator, CUDA tensors)."""
    if gen.device.type != torch.device(device).type:
        gen = torch.Generator(device).manual_seed(int(torch.randint(1 << 62, (1,), generator=gen)))
    order = torch.randperm(B, generator=gen, device=device).cpu()
    lens = torch.tensor(spaced_lengths(B, lo, n_max), dtype=torch.int32)[order]
    q = torch.randn(B, hq, D, generator=gen, device=device).half()
    k = torch.empty(B, hkv, n_max, D, dtype=torch.float16, device=device)
    v = torch.empty_like(k)
    for t in (k, v):  # one sequence at a time: no fp32 copy of the whole cache
        for b in range(B):
            t[b].copy_(torch.randn(hkv, n_max, D, generator=gen, device=device))
    return [q, k, v, lens.to(device)]


def _make_speed_inputs(gen, device):
    s = SPEED_SHAPE
    return speed_inputs(s["B"], s["HQ"], s["HKV"], s["N_MAX"], s["D"], s["LO"], gen, device)


def live_cache_bytes(inputs) -> int:
    q, k, _, lens = inputs[:4]
    return decode_bytes(k.shape[0], k.shape[1], int(lens.sum()), k.shape[3], k.element_size())


def sdpa_padded(q, k_cache, v_cache, seq_lens):
    """What a PyTorch user writes: SDPA over the padded cache, a mask for each sequence's length, the KV heads
    shared by enable_gqa (no copy of K and V per query head)."""
    n_max = k_cache.shape[2]
    mask = torch.arange(n_max, device=q.device)[None, None, None, :] < seq_lens[:, None, None, None]
    o = torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k_cache, v_cache, attn_mask=mask,
                                                         enable_gqa=True)
    return o[:, :, 0]


def copy_bytes(inputs) -> int:
    """The live cache's bytes at the speed shape, from shapes alone (its lengths are spaced_lengths, shuffled), so
    that the timed copy never reads the lengths back to the host."""
    _, k, _, _ = inputs[:4]
    total = sum(spaced_lengths(k.shape[0], SPEED_SHAPE["LO"], k.shape[2]))
    return decode_bytes(k.shape[0], k.shape[1], total, k.shape[3], k.element_size())


def _copy_baseline_factory():
    """A device copy moving copy_bytes(inputs) (read half, write half): the device's copy bandwidth."""
    buf = {}

    def copy(q, k, v, lens):
        n = copy_bytes([q, k, v, lens]) // 4  # fp16 elements: read n, write n
        key = (n, str(q.device))
        if key not in buf:
            buf.clear()
            buf[key] = (torch.randn(n, device=q.device).half(), torch.empty(n, device=q.device, dtype=torch.float16))
        src, dst = buf[key]
        return dst.copy_(src)
    return copy


def _speed_reference(inputs):
    q, k, v, lens = inputs
    return decode_reference(q, k, v, lens, dtype=torch.float32)[0]


def _speed(pid, baseline, name, metric, bands, baseline_bytes=None):
    return SpeedProblem(pid, 2, ("decode_attention",), f"decode_attention: {name}", signature=SIGNATURE,
                        make_inputs=_make_speed_inputs, baseline=baseline, baseline_name=name,
                        reference_full=_speed_reference, sketch_of=lambda out: out[0], bytes_moved=live_cache_bytes,
                        baseline_bytes=baseline_bytes, metric=metric, bands=bands,
                        out_dtype=lambda inputs: torch.float16, precheck=DECODE)


SPEED_BANDWIDTH = _speed("decode_bandwidth", _copy_baseline_factory(),
                         "bandwidth vs a device copy of the cache's bytes", "bandwidth",
                         ((0.80, 1.0), (0.60, 0.6), (0.40, 0.3)), baseline_bytes=copy_bytes)
SPEED_SDPA = _speed("decode_speed_sdpa", sdpa_padded, "speed vs SDPA on the padded batch (enable_gqa)", "speedup",
                    ((1.0, 1.0), (0.75, 0.6), (0.5, 0.3)))

PROBLEMS = [ANSWERS, MERGE, DECODE, DECODE_LONG, GQA_READS, PAGED, SPEED_BANDWIDTH, SPEED_SDPA]


# ------------------------------------------------------------------ what the notebook calls
check_answers_decode = learner.checker(ANSWERS)
check_merge_partials = learner.checker(MERGE)
check_decode_attention = learner.checker(DECODE)
check_decode_long = learner.checker(DECODE_LONG)
check_gqa_reads = learner.checker(GQA_READS)
check_paged_decode = learner.checker(PAGED)
check_decode_bandwidth = learner.checker(SPEED_BANDWIDTH)
check_decode_speed_sdpa = learner.checker(SPEED_SDPA)


def example_batch(B=4, hq=8, hkv=2, n_max=None, D=64, page=16, seed=0):
    """A small batch to try things on: (q, k_cache, v_cache, seq_lens) and its paged copy (k_pages, v_pages,
    block_table), on this machine's device."""
    n_max = n_max or (4096 if DEVICE.on_gpu else 300)
    gen = torch.Generator().manual_seed(seed)
    lens = _lengths(gen, B, n_max)
    q, k, v = cache(gen, B, hq, hkv, n_max, D, lens)
    kp, vp, table = page_cache(gen, k, v, lens, page)
    dev = DEVICE.torch_device
    return [t.to(dev) for t in (q, k, v, lens)], [t.to(dev) for t in (kp, vp, table)]


def split_plan(batch: int = 32, kv_heads: int = 8, max_len: int = 32768, sms: int | None = None,
               splits: int | None = None, lengths=None):
    """How the programs of a split-KV launch fill the SMs (ipywidgets): pick the number of splits."""
    from .widgets import split_waves
    return split_waves(batch, kv_heads, max_len, sms or DEVICE.sms or 132, splits, lengths)


def decode_sweep(decode_attention, batches=(1, 8, 32), lengths=(1024, 8192, 32768),
                 hq: int = 32, hkv: int = 8, D: int = 128, plot: bool = True) -> list[dict]:
    """Fraction of the copy bandwidth on the cache bytes for yours and SDPA, over batch and context
    (GPU only)."""
    if not DEVICE.on_gpu:
        print("No GPU: the sweep needs one. assets/bench/lesson09.md shows an H200's.")
        return []
    from ...ceilings import measure_ceilings
    from ...sweeps import time_contenders
    bw = measure_ceilings(quiet=True).copy_gbps
    rows = []
    for B in batches:
        for n in lengths:
            q, k, v, lens = speed_inputs(B, hq, hkv, n, D, max(1, n // 2), torch.Generator().manual_seed(B * n), "cuda")
            fns = {"yours": decode_attention, "SDPA (padded, GQA)": sdpa_padded}
            t = time_contenders(fns, [q, k, v, lens], rounds=1)
            gb = live_cache_bytes([q, k, v, lens]) / 1e9
            rows.append({"B": B, "context": n} | {f"{name}_pct": 100 * gb / (t[f"{name}_ms"] * 1e-3) / bw
                                                  for name in fns})
            del q, k, v
            print(rows[-1])
    if plot and rows:
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 3.5))
        labels = [f"B={r['B']}\n{r['context'] // 1024}k" for r in rows]
        for i, name in enumerate(("yours", "SDPA (padded, GQA)")):
            ax.bar([j + 0.4 * i for j in range(len(rows))], [r[f"{name}_pct"] for r in rows], 0.4, label=name)
        ax.set_xticks([j + 0.2 for j in range(len(rows))], labels)
        ax.set_ylabel("% of copy bandwidth")
        ax.legend()
        plt.show()
    return rows


def roofline(decode_attention=None):
    """Time the kernel once more (GPU), record it and draw the roofline with every point so far."""
    from ...roofline import measure_point, plot_roofline
    if decode_attention is not None:
        shape = (8, 32, 8, 8192, 128, 4096) if DEVICE.on_gpu else (2, 8, 2, 256, 64, 64)
        inputs = speed_inputs(*shape, torch.Generator().manual_seed(0), DEVICE.torch_device)
        q, k, _, lens = inputs
        flops = decode_flops(q.shape[1], int(lens.sum()), q.shape[2])
        measure_point("decode attention", decode_attention, inputs, flops, live_cache_bytes(inputs))
    return plot_roofline()


def going_further() -> None:
    """Which ungraded extensions this GPU can run, and why the others are skipped."""
    from ...device import explain_extensions
    cc = DEVICE.capability or (0, 0)
    rows = [
        ("a few queries per sequence (speculative decoding): the G heads x T queries share the K/V loads", True, ""),
        ("FP8 KV cache (e4m3 K and V, one scale per head), dequantised after the load", DEVICE.on_gpu and cc >= (8, 9),
         "needs sm_89+ (Ada, Hopper); the interpreter has no FP8 arithmetic"),
        ("bf16 queries and cache", DEVICE.supports_bf16(), "needs sm_80+; the interpreter has no bf16"),
    ]
    explain_extensions(rows)
