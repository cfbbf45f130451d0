"""Lesson 09 on the GPU: the solution's decode attention (contiguous and paged) against a device copy of the
cache's bytes, SDPA on the padded batch (enable_gqa) and FlexAttention, at the issue's batch (B=32, 32 query and
8 KV heads, D=128, fp16, lengths 1k-32k) and on a grid of batch, head dim and context. Each time is given by the
course timer (timing.interleaved: launches hidden) and by triton.testing.do_bench (median, launches paid).
Called by ``kernellab bench --lessons 09_serve_it``; about 2 minutes on an H200."""
from __future__ import annotations

import json
import pathlib

import torch

from ...device import DEVICE

MAIN = (32, 32, 8, 32768, 128, 1024)  # B, HQ, HKV, N_MAX, D, shortest length
GRID = [(B, D, n) for B in (1, 8, 64) for D in (64, 128) for n in (1024, 16384)]
TARGETS = {"copy_fraction": 0.80, "vs_sdpa": 1.0, "paged_vs_contiguous": 0.90}  # issue 57
PAGE = 16


def _paged_copy(k, v, page: int, gen):
    """The cache's pages shuffled into one pool (n_pages, PAGE, HKV, D) and the block table that finds them."""
    B, hkv, n_max, D = k.shape
    per = n_max // page
    perm = torch.randperm(B * per, generator=gen).to(k.device)
    pools = []
    for t in (k, v):
        pool = torch.empty(B * per, page, hkv, D, dtype=t.dtype, device=t.device)
        for b in range(B):  # one sequence at a time: no second full-size temporary
            pool[perm[b * per:(b + 1) * per]] = t[b].view(hkv, per, page, D).permute(1, 2, 0, 3)
        pools.append(pool)
    return pools[0], pools[1], perm.view(B, per).to(torch.int32)


def _flex(q, k, v, lens):
    """FlexAttention, compiled, with a block mask for the lengths (None, and why, where it cannot run)."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        B, n_max = k.shape[0], k.shape[2]
        mask = create_block_mask(lambda b, h, qi, kv: kv < lens[b], B, None, 1, n_max, device=q.device)
        fn = torch.compile(flex_attention, dynamic=False)

        def run(q, k, v, lens):
            return fn(q[:, :, None], k, v, block_mask=mask, enable_gqa=True)[:, :, 0]
        run(q, k, v, lens)
        return run, None
    except Exception as exc:  # noqa: BLE001 - an optional comparison: say why it is missing
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def _time(fns: dict, rounds: int) -> tuple[dict, dict]:
    from ...timing import do_bench_ms, interleaved
    course = interleaved(fns, rounds)
    return {k: course[k] for k in fns}, do_bench_ms(fns)


def _errors(out, q, k, v, lens):
    """Relative error of the output on the first two sequences against the float32 reference."""
    from ...compare import rel_error
    from .problems import decode_reference
    ref = decode_reference(q[:2], k[:2], v[:2], lens[:2], dtype=torch.float32)[0]
    return rel_error(out[:2], ref)


def _shape(sol, B, hq, hkv, n_max, D, lo, seed, rounds, flex=False, paged=True) -> dict:
    from .problems import live_cache_bytes, sdpa_padded, speed_inputs
    gen = torch.Generator().manual_seed(seed)
    q, k, v, lens = speed_inputs(B, hq, hkv, n_max, D, lo, gen, "cuda")
    gb = live_cache_bytes([q, k, v, lens]) / 1e9
    n = int(gb * 1e9) // 4
    src, dst = torch.randn(n, device="cuda").half(), torch.empty(n, device="cuda", dtype=torch.float16)
    decode = sol["decode_attention"]
    fns = {"solution": lambda: decode(q, k, v, lens), "SDPA": lambda: sdpa_padded(q, k, v, lens),
           "copy": lambda: dst.copy_(src)}
    row = {"B": B, "HQ": hq, "HKV": hkv, "N_MAX": n_max, "D": D, "live_gb": gb,
           "splits": sol["pick_splits"](B, hkv, n_max, DEVICE.sms),
           "error": _errors(decode(q, k, v, lens)[0], q, k, v, lens)}
    if paged:
        kp, vp, table = _paged_copy(k, v, PAGE, gen)
        pd = sol["paged_decode_attention"]
        fns["paged"] = lambda: pd(q, kp, vp, table, lens)
        row["paged_error"] = _errors(pd(q, kp, vp, table, lens)[0], q, k, v, lens)
    if flex:
        run, why = _flex(q, k, v, lens)
        if run is not None:
            fns["FlexAttention"] = lambda: run(q, k, v, lens)
        row["flex_missing"] = why
    course, dob = _time(fns, rounds)
    with_times(row, course, dob)
    return row  # the inputs go with this frame (the caller empties the allocator's cache)


def with_times(row: dict, course: dict, dob: dict) -> dict:
    """Add to ``row`` each contender's times by both timers (ms), its share of the copy's bandwidth on the live
    cache's bytes (the copy moves as many: half read, half written), and the ratios the targets are about."""
    gb = row["live_gb"]
    for timer, t in (("course", course), ("do_bench", dob)):
        for name, ms in t.items():
            row[f"{name}_{timer}_ms"] = ms
            row[f"{name}_{timer}_copy_fraction"] = t["copy"] / ms
        row[f"vs_sdpa_{timer}"] = t["SDPA"] / t["solution"]
        if "FlexAttention" in t:
            row[f"vs_flex_{timer}"] = t["FlexAttention"] / t["solution"]
        if "paged" in t:
            row[f"paged_vs_contiguous_{timer}"] = t["solution"] / t["paged"]
    row["copy_gb_per_s"] = gb / course["copy"] * 1e3
    return row


def _splits_sweep(sol, rounds: int) -> list[dict]:
    """The main batch again with the number of splits forced (the solution's choice is the row marked)."""
    from ...timing import do_bench_ms
    from .problems import live_cache_bytes, speed_inputs
    q, k, v, lens = speed_inputs(*MAIN, torch.Generator().manual_seed(7), "cuda")
    gb = live_cache_bytes([q, k, v, lens]) / 1e9
    own = sol["pick_splits"]
    chosen = own(MAIN[0], MAIN[2], MAIN[3], DEVICE.sms)
    rows = []
    try:
        for s in sorted({1, 2, 4, 8, 16, 32, 64, chosen}):
            sol["pick_splits"] = lambda *a, s=s: s  # _decode reads the name from the solution's namespace
            ms = do_bench_ms({"s": lambda: sol["decode_attention"](q, k, v, lens)})["s"]
            rows.append({"splits": s, "ms": ms, "gb_per_s": gb / ms * 1e3, "chosen": s == chosen})
    finally:
        sol["pick_splits"] = own
    return rows


def bench_lesson09(quick: bool = False) -> dict | None:
    if not DEVICE.on_gpu:
        return None
    import sys

    from ...notebook_cells import load_solution
    sol = load_solution("09_serve_it", ("decode_attention", "paged_decode_attention", "pick_splits"))
    rounds = 3 if quick else 5
    print("lesson 09: the main batch", file=sys.stderr)
    main = _shape(sol, *MAIN, seed=1, rounds=rounds, flex=True)
    grid = []
    for B, D, n in (GRID[:4] if quick else GRID):
        torch.cuda.empty_cache()
        print(f"lesson 09: B={B} D={D} context {n}", file=sys.stderr)
        grid.append(_shape(sol, B, 32, 8, n, D, max(1, n // 2), seed=B * n + D, rounds=3))
    torch.cuda.empty_cache()
    return {"device": DEVICE.as_dict(), "main": main, "grid": grid, "splits": _splits_sweep(sol, rounds),
            "targets": TARGETS}


def _f(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def write_lesson09(res: dict | None, out: pathlib.Path) -> None:
    from ...report import TIMING, _header, md_table, met
    if res is None:
        return
    m = res["main"]
    lines = ["# Lesson 09 benchmark: decode attention", ""] + _header() + ["", TIMING + " Beside it, "
             "`triton.testing.do_bench` (median; launches paid).", "",
             f"## the issue's batch: B={m['B']}, {m['HQ']} query / {m['HKV']} KV heads, D={m['D']}, fp16, lengths "
             f"{MAIN[5]}-{MAIN[3]} in a {MAIN[3]} cache ({m['live_gb']:.2f} GB of live cache; the solution's "
             f"{m['splits']} splits)", "",
             f"Targets: >= {TARGETS['copy_fraction']:.0%} of the copy bandwidth, >= {TARGETS['vs_sdpa']}x SDPA "
             f"(padded, enable_gqa), paged >= {TARGETS['paged_vs_contiguous']}x contiguous's speed. The device "
             f"copy of as many bytes ran at {m['copy_gb_per_s']:,.0f} GB/s (course timer).", ""]
    names = [n for n in ("solution", "paged", "SDPA", "FlexAttention", "copy") if f"{n}_course_ms" in m]
    lines += md_table(["contender", "course ms", "do_bench ms", "% of copy (course)", "% of copy (do_bench)"], [
        [n, f"{m[f'{n}_course_ms']:.3f}", f"{m[f'{n}_do_bench_ms']:.3f}",
         f"{100 * m[f'{n}_course_copy_fraction']:.0f}", f"{100 * m[f'{n}_do_bench_copy_fraction']:.0f}"]
        for n in names])
    lines += [""]
    lines += md_table(["check", "course", "do_bench", "met (course)"], [
        ["fraction of copy bandwidth", _f(m["solution_course_copy_fraction"]), _f(m["solution_do_bench_copy_fraction"]),
         met(m["solution_course_copy_fraction"], TARGETS["copy_fraction"])],
        ["x SDPA (padded, GQA)", _f(m["vs_sdpa_course"]), _f(m["vs_sdpa_do_bench"]),
         met(m["vs_sdpa_course"], TARGETS["vs_sdpa"])],
        ["x FlexAttention", _f(m.get("vs_flex_course")), _f(m.get("vs_flex_do_bench")),
         met(m["vs_flex_course"], 1.0) if "vs_flex_course" in m else "-"],
        ["paged / contiguous speed", _f(m["paged_vs_contiguous_course"]), _f(m["paged_vs_contiguous_do_bench"]),
         met(m["paged_vs_contiguous_course"], TARGETS["paged_vs_contiguous"])]])
    if m.get("flex_missing"):
        lines += ["", f"FlexAttention did not run here: {m['flex_missing']}"]
    lines += ["", f"Relative error of the output (first two sequences, against float32): contiguous {m['error']:.1e}, "
              f"paged {m['paged_error']:.1e}.", "",
              "## the grid: 32 query / 8 KV heads, lengths from half the context to all of it (do_bench ms; "
              "x SDPA and paged / contiguous by both timers)", ""]
    lines += md_table(["B", "D", "context", "splits", "solution ms", "paged ms", "SDPA ms", "% of copy",
                       "x SDPA (course / do_bench)", "met", "paged / contiguous"], [
        [r["B"], r["D"], r["N_MAX"], r["splits"], f"{r['solution_do_bench_ms']:.3f}", f"{r['paged_do_bench_ms']:.3f}",
         f"{r['SDPA_do_bench_ms']:.3f}", f"{100 * r['solution_do_bench_copy_fraction']:.0f}",
         f"{r['vs_sdpa_course']:.2f} / {r['vs_sdpa_do_bench']:.2f}",
         met(min(r["vs_sdpa_course"], r["vs_sdpa_do_bench"]), 1.0),
         f"{r['paged_vs_contiguous_course']:.2f} / {r['paged_vs_contiguous_do_bench']:.2f}"] for r in res["grid"]])
    lines += ["", "## the main batch by number of splits (do_bench; * the solution's pick_splits)", ""]
    lines += md_table(["splits", "ms", "GB/s of live cache"], [
        [f"{r['splits']}{' *' if r['chosen'] else ''}", f"{r['ms']:.3f}", f"{r['gb_per_s']:,.0f}"]
        for r in res["splits"]])
    (out / "lesson09.md").write_text("\n".join(lines) + "\n")
    (out / "lesson09.json").write_text(json.dumps(res, indent=1, default=str))
