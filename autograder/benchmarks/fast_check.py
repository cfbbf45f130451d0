"""Issue 56's changes, before and after, on one GPU: host time per call, lesson 02's matmul at misaligned shapes,
lesson 07's LayerNorm backward and training step with launches paid.

"Before" is the solution as it was (the kernels launched through Triton's own path, ``kernel[grid](...)``; lesson
02's kernel told nothing of its strides' alignment, ``A_ALIGN = B_ALIGN = C_ALIGN = 1``, no operand padded, its grid
by ``triton.cdiv`` and its output by ``torch.empty``;
lesson 07's wrapper working out its launch plan, the SM count included, on every call and allocating with
``torch.empty(shape, dtype=, device=)``), rebuilt from today's solution by the text edits in ``BEFORE_02`` and
``BEFORE_07`` (each edit must apply, or the script stops). "After" is the solution as it is. Every row is timed
three ways: the course timer (timing.interleaved: the host's time hidden), ``triton.testing.do_bench`` (launches
paid) and the host's time per call (timing.host_us). Outputs are compared too: after against before (the same
kernels: equal to the last bit where no autotuner is involved) and lesson 02 against fp32 cuBLAS. The LayerNorm
part also prices the host's pieces of a call (an allocation, a Triton launch through kl.fast and the launcher
alone, triton.cdiv), which set the floor under a wrapper's host time.

    PYTHONPATH=autograder python3 autograder/benchmarks/fast_check.py --out DIR
        # GPU, about 3 minutes on an H200 (most of it compiling: the matmul's ten configurations per variant and
        # shape, three torch.compile'd steps): DIR/fast_check.json and DIR/fast_check.md
    PYTHONPATH=autograder python3 autograder/benchmarks/fast_check.py --parts candidates --out DIR2
        # GPU, about 1.5 minutes: lesson 03 and 04's candidates (not in the default run, to keep it under 4 minutes)
    PYTHONPATH=autograder python3 autograder/benchmarks/fast_check.py --cpu-check
        # no GPU: the variants built and run in the interpreter against float64, every GPU part's code run on tiny
        # shapes with constant timers, and lesson 02's kernel compiled for sm_90 (its loads counted)

On the GPU it prints each part's time as it goes and rewrites the report after each part, so that a run stopped
by a time limit keeps what it measured. ``--parts`` picks parts (matmul, ln, step; default all).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import kernellab  # noqa: F401 - before triton
import torch

from kernellab.device import DEVICE

DEV = DEVICE.torch_device

# Lesson 02: the launch through Triton's own path, and no alignment hints.
BEFORE_02 = [("kl.fast(matmul_kernel)[grid](", "matmul_kernel[grid]("),
             ("A_ALIGN=a_align, B_ALIGN=b_align,\n                                 C_ALIGN=_align(N))",
              "A_ALIGN=1, B_ALIGN=1, C_ALIGN=1)"),
             ('-(M // -meta["BLOCK_M"]) * -(N // -meta["BLOCK_N"])',
              'triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])'),
             ("c = a.new_empty((M, N))", "c = torch.empty((M, N), device=a.device, dtype=a.dtype)"),
             ("if M * N * K >= PAD_ABOVE and", "if False and")]
# Lesson 07: every launch through Triton's own path, the SM count asked on every call, the ops under other names
# (two versions of one custom op name in one process would share the newer implementation).
BEFORE_07 = [("kl.fast(ln_backward_rows_kernel)[", "ln_backward_rows_kernel["),
             ("kl.fast(ln_backward_reduce_kernel)[", "ln_backward_reduce_kernel["),
             ("    if key not in _PLANS:\n", "    if True:  # before: the plan (SM count included) every call\n"),
             ("dh = h.new_empty((n_rows, n_cols))", "dh = torch.empty((n_rows, n_cols), dtype=h.dtype, device=h.device)"),
             ("dw = weight.new_empty((n_cols,))", "dw = torch.empty((n_cols,), dtype=weight.dtype, device=h.device)"),
             ("db = weight.new_empty((n_cols,))", "db = torch.empty((n_cols,), dtype=weight.dtype, device=h.device)"),
             ("kl.fast(add_layernorm_kernel)[", "add_layernorm_kernel["),
             ("kl.fast(flash_fwd_kernel)[", "flash_fwd_kernel["),
             ("kl.fast(dq_kernel)[", "dq_kernel["),
             ("kl.fast(dkdv_kernel)[", "dkdv_kernel["),
             ('"kl07::', '"kl07before::')]
# Candidates (not in the solutions; each a text edit, timed against the solution as it is and the baseline the issue
# names). Lesson 03's add + LayerNorm at 768 columns (0.97-1.00x torch.compile): 16 Mi fp16 elements move 100 MB,
# ~25 us at an H200's bandwidth, in 10,923 programs of 2 rows x 1024 lanes (a quarter of them masked off); the
# candidates change rows per program and warps (latency hiding against the reduction's shuffles) and drop int64
# row offsets (the 64-bit multiplies of every address; safe below 2^31 elements).
LN03_ROWS_WARPS = ((1, 2), (1, 4), (4, 4), (4, 8), (8, 8))
LN03_LINES = ("    rows = max(1, 2048 // block_c)  # short rows: two per program, four warps (measured best at 768)\n"
              "    warps = max(4, min(16, rows * block_c // 512))\n")
# Lesson 04's forward at D=128 (0.88-0.94x the Triton tutorial's): its exponentials already use exp2 with the scale
# folded into one multiply-add, and full key blocks run unmasked; what is left to try cheaply is the tile schedule.
# At D=128 a 128 x 128 tile with three stages needs 128*128*2 + 3*2*128*128*2 = 224 KB of shared memory, at the
# H100's 227 KB limit; two stages (160 KB) leave room, and narrower key blocks (32) with 4 warps halve registers.
FWD04_EXTRA = ((128, 128, 8, 2), (128, 64, 8, 2), (128, 64, 4, 2), (128, 32, 4, 3), (128, 32, 8, 3))
FWD04_SHAPES = ((1024, False), (1024, True), (4096, False), (4096, True))  # B=4, H=32, D=128
# 1024^3: host-bound before (47.8 us by do_bench vs cuBLAS's 9.2 on an H200); the two misaligned shapes of lesson
# 08's benchmark (all three misaligned shapes are in lesson 02's: kernellab bench --lessons 02_tiled_matmul). Every
# shape costs the autotuner's ten compiles per variant; the odd one compiles once (both variants have ALIGN = 1).
MATMUL_SHAPES = ((1024, 1024, 1024), (3000, 5000, 1500), (4095, 4097, 4093), (3001, 4999, 1503))
LN_WIDTHS = (768, 1024, 4096)
LN_ROWS = 4096  # 3-25 MB moved: the short calls where host time shows
TARGETS = {"ln_backward_host_us": 20.0, "matmul_misaligned_vs_cublas": 0.8, "matmul_1024_do_bench_vs_cublas": 0.8,
           "step_do_bench_vs_sdpa": 1.0, "step_do_bench_vs_compile": 1.0}


def _edit(pairs: list):
    """A load_solution ``edit`` applying ``pairs`` to every cell, and a check that each pair applied somewhere."""
    hits = {old: 0 for old, _ in pairs}

    def edit(src: str) -> str:
        for old, new in pairs:
            hits[old] += src.count(old)
            src = src.replace(old, new)
        return src

    def check():
        missing = [old for old, n in hits.items() if n == 0]
        if missing:
            raise RuntimeError(f"the solution no longer contains {missing}: update fast_check.py's BEFORE lists")
    return edit, check


def load(lesson: str, names: tuple, pairs: list | None, tag: str) -> dict:
    from kernellab.notebook_cells import load_solution
    if not pairs:
        return load_solution(lesson, names, tag=tag)
    edit, check = _edit(pairs)
    ns = load_solution(lesson, names, edit=edit, tag=tag)
    check()
    return ns


def rel_err(got, ref) -> float:
    got, ref = got.double(), ref.double()
    return ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def three(fns: dict, rounds: int = 3, n_host: int = 30) -> dict:
    """name -> {course_ms, do_bench_ms, host_us}."""
    from kernellab.timing import do_bench_ms, host_us, interleaved
    course = interleaved(fns, rounds)
    paid = do_bench_ms(fns)
    return {k: {"course_ms": course[k], "do_bench_ms": paid[k], "host_us": host_us(f, n=n_host, rounds=5)}
            for k, f in fns.items()}


# ---------------------------------------------------------------- parts (GPU)

def part_matmul(shapes=MATMUL_SHAPES) -> dict:
    names = ("matmul",)
    before = load("02_tiled_matmul", names, BEFORE_02, "before")
    after = load("02_tiled_matmul", names, None, "after")
    rows = []
    for m, n, k in shapes:
        g = torch.Generator(device=DEV).manual_seed(m + n + k)
        a = torch.randn(m, k, device=DEV, generator=g).half()
        b = torch.randn(k, n, device=DEV, generator=g).half()
        ref = a.float() @ b.float()
        fns = {"before": lambda: before["matmul"](a, b), "after": lambda: after["matmul"](a, b),
               "cublas": lambda: torch.matmul(a, b)}
        # the second call: after's launches go through kl.fast's direct path from the second call at a shape
        errors = {v: rel_err((fns[v](), fns[v]())[1], ref) for v in ("before", "after")}
        t = three(fns)
        row = {"shape": [m, n, k], "errors": errors, "times": t,
               "configs": {v: str(ns["matmul_kernel"].best_config) for v, ns in (("before", before), ("after", after))}}
        for v in ("before", "after"):
            row[f"{v}_vs_cublas"] = t["cublas"]["course_ms"] / t[v]["course_ms"]
            row[f"{v}_do_bench_vs_cublas"] = t["cublas"]["do_bench_ms"] / t[v]["do_bench_ms"]
        rows.append(row)
        print(f"  matmul {m}x{n}x{k}: x cuBLAS before {row['before_vs_cublas']:.2f} / do_bench "
              f"{row['before_do_bench_vs_cublas']:.2f}; after {row['after_vs_cublas']:.2f} / "
              f"{row['after_do_bench_vs_cublas']:.2f}; host us {t['before']['host_us']:.1f} -> "
              f"{t['after']['host_us']:.1f}", flush=True)
    fast = kernellab.fast(after["matmul_kernel"]).stats
    return {"rows": rows, "fast_launch_stats": dict(fast)}


def part_ln(widths=LN_WIDTHS, rows=LN_ROWS) -> dict:
    from kernellab.lessons.l07_ship_it import problems as L
    names = ("add_layernorm_backward",)
    before = load("07_ship_it", names, BEFORE_07, "before")["add_layernorm_backward"]
    after_ns = load("07_ship_it", names, None, "after")
    after = after_ns["add_layernorm_backward"]
    out = []
    for d in widths:
        inputs = L.ln_inputs(rows, d, seed=d)
        ref = L.ln_grads(*inputs, dtype=torch.float32)
        outs = {"before": before(*inputs), "after": (after(*inputs), after(*inputs))[1]}  # the second: kl.fast's path
        same = all(torch.equal(x, y) for x, y in zip(outs["before"], outs["after"]))
        errors = {v: max(rel_err(g, r) for g, r in zip(o, ref)) for v, o in outs.items()}
        t = three({"before": lambda: before(*inputs), "after": lambda: after(*inputs)}, n_host=100)
        out.append({"d": d, "rows": rows, "after_equals_before": same, "errors": errors, "times": t})
        print(f"  LN backward d={d}: host us {t['before']['host_us']:.1f} -> {t['after']['host_us']:.1f}; do_bench us "
              f"{t['before']['do_bench_ms'] * 1e3:.1f} -> {t['after']['do_bench_ms'] * 1e3:.1f}; course timer us "
              f"{t['after']['course_ms'] * 1e3:.1f}; identical: {same}", flush=True)
    stats = {k: dict(kernellab.fast(after_ns[k]).stats) for k in ("ln_backward_rows_kernel", "ln_backward_reduce_kernel")}
    return {"rows": out, "fast_launch_stats": stats, "host_prices_us": host_prices()}


def host_prices() -> dict:
    """Host microseconds per call of the pieces a kernel wrapper is made of (timing.host_us); GPU only (the
    interpreter has no launcher to price)."""
    if not DEVICE.on_gpu:
        return {}
    import triton
    from kernellab import launch
    from kernellab.timing import host_us
    x = torch.empty((4096, 1024), dtype=torch.float16, device=DEV)
    fk = kernellab.fast(_one_arg_kernel)
    for _ in range(2):
        fk[(1,)](x, N=1)  # the first call compiles, the second pins
    compiled, tail, _extra, _t, _c = next(iter(fk.pins.values()))
    full = (x, *tail)
    dev = launch._device()

    def launcher():
        compiled.run(1, 1, 1, launch._stream(dev), compiled.function, compiled.packed_metadata, None, None, None,
                     *full)
    prices = {
        "torch.empty(shape, dtype=, device=)": lambda: torch.empty((4096, 1024), dtype=torch.float16, device=x.device),
        "x.new_empty(shape)": lambda: x.new_empty((4096, 1024)),
        "a slice, x[8:]": lambda: x[8:],
        "triton.cdiv": lambda: triton.cdiv(4096, 64),
        "triton.next_power_of_2": lambda: triton.next_power_of_2(1000),
        "Triton's launcher alone (one pointer)": launcher,
        "kl.fast launch (one pointer)": lambda: fk[(1,)](x, N=1),
        "Triton's own launch, kernel[grid](...) (one pointer)": lambda: _one_arg_kernel[(1,)](x, N=1),
        "torch.add of two 1024-vectors (an ATen op)": lambda: torch.add(x[0], x[1]),
    }
    res = {k: host_us(f, n=200, rounds=5) for k, f in prices.items()}
    print("  host prices, us: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()), flush=True)
    return res


def _ln_floor_us(prices: dict) -> float | None:
    """Two kl.fast launches and four new_empty allocations, priced (host_prices' keys), or None if not priced."""
    launch, alloc = prices.get("kl.fast launch (one pointer)"), prices.get("x.new_empty(shape)")
    return None if launch is None or alloc is None else 2 * launch + 4 * alloc


def _kernel_of_one_arg():
    import triton
    import triton.language as tl

    @triton.jit
    def one_arg(x_ptr, N: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, N), tl.zeros([N], x_ptr.dtype.element_ty))
    return one_arg


_one_arg_kernel = _kernel_of_one_arg()


def part_step(rounds: int = 3, shape=None) -> dict:
    from kernellab.lessons.l07_ship_it import problems as L
    from kernellab.timing import STEP_HOST_MS, do_bench_ms, host_enqueue_ms, host_us, interleaved
    names = ("block_forward",)
    before = load("07_ship_it", names, BEFORE_07, "before")["block_forward"]
    after = load("07_ship_it", names, None, "after")["block_forward"]
    shape = shape or L.GPU_SHAPE
    fns = L.step_contenders(None)
    if not DEVICE.on_gpu:  # the CPU dry run: Inductor would compile C++ for minutes
        fns.pop("torch.compile(eager + SDPA)")
    fns["yours, compiled (before)"] = lambda x, p, dout, h: L.step_through_compile(before, x, *p, dout, h)
    fns["yours, compiled (after)"] = lambda x, p, dout, h: L.step_through_compile(after, x, *p, dout, h)
    t0 = time.perf_counter()
    calls = L.step_calls(fns, shape, graphs=False)  # compiles here
    compile_s = time.perf_counter() - t0
    for _ in range(2):  # a step after its first: every launch of the after variant through kl.fast's direct path
        got = {v: calls[f"yours, compiled ({v})"]() for v in ("before", "after")}
    step_err = max(rel_err(a, b) for a, b in zip(got["after"], got["before"]))  # output, dx and 12 weight gradients
    course = interleaved(calls, rounds, hide_ms=STEP_HOST_MS)  # as the graded steps are timed
    paid = do_bench_ms(calls)
    enqueue = host_enqueue_ms(calls)
    res = {"shape": shape._asdict(), "compile_s": compile_s, "after_vs_before_rel_error": step_err, "times": {
        k: {"course_ms": course[k], "do_bench_ms": paid[k], "host_enqueue_ms": enqueue[k]["host_ms"],
            "host_us": host_us(calls[k], n=5, rounds=3)} for k in calls}}
    base, comp = paid["eager + SDPA"], paid.get("torch.compile(eager + SDPA)", float("nan"))
    for v in ("before", "after"):
        ms = paid[f"yours, compiled ({v})"]
        res[f"{v}_do_bench_vs_sdpa"], res[f"{v}_do_bench_vs_compile"] = base / ms, comp / ms
        print(f"  step {v}: do_bench {ms:.3f} ms (x eager + SDPA {base / ms:.2f}, x compile {comp / ms:.2f}); "
              f"host enqueue {enqueue[f'yours, compiled ({v})']['host_ms']:.3f} ms", flush=True)
    return res


def _ln03_variants() -> dict:
    """name -> edit pairs of lesson 03's add_layernorm: the candidates above."""
    out = {f"{r} rows, {w} warps": [(LN03_LINES, f"    rows, warps = {r}, {w}\n")] for r, w in LN03_ROWS_WARPS}
    out["int32 row offsets"] = [("rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)",
                                 "rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)")]
    return out


def _fwd04_pairs() -> list:
    extra = "".join(f", ({bm}, {bn}, {w}, {st})" for bm, bn, w, st in FWD04_EXTRA)
    return [("(128, 128, 8, 3)]]", f"(128, 128, 8, 3){extra}]]")]


def part_candidates(rounds: int = 3, ln_shape=(16 * 1024 * 1024 // 768, 768), fwd_shapes=FWD04_SHAPES,
                    bh=(4, 32)) -> dict:
    from kernellab.lessons.attention import attention_flops, attention_reference, qkv
    from kernellab.lessons.l03_fused_softmax_layernorm import problems as L3
    from kernellab.lessons.l08_hopper.problems import attention_cudnn
    from kernellab.timing import do_bench_ms, interleaved
    res = {"ln03": {}, "fwd04": []}
    inputs = L3._randn_ln(ln_shape)(torch.Generator(DEV).manual_seed(1), DEV)
    ref = L3.add_layernorm_reference(*inputs)
    fns = {"solution": load("03_fused_softmax_layernorm", ("add_layernorm",), None, "sol")["add_layernorm"]}
    for name, pairs in _ln03_variants().items():
        fns[name] = load("03_fused_softmax_layernorm", ("add_layernorm",), pairs, name)["add_layernorm"]
    fns["torch.compile"] = L3._compiled(L3.add_layernorm_eager) if DEVICE.on_gpu else L3.add_layernorm_eager
    errors = {k: rel_err(f(*inputs), ref) for k, f in fns.items()}
    calls = {k: (lambda f=f: f(*inputs)) for k, f in fns.items()}
    course, paid = interleaved(calls, rounds), do_bench_ms(calls)
    comp = course["torch.compile"]
    res["ln03"] = {k: {"course_ms": course[k], "do_bench_ms": paid[k], "vs_compile": comp / course[k],
                       "rel_error": errors[k]} for k in fns}
    print(f"  add + LayerNorm at {ln_shape[1]}: " + ", ".join(f"{k} {v['vs_compile']:.3f}x" for k, v in res["ln03"].items()),
          flush=True)
    names = ("flash_attention",)
    sol = load("04_flash_attention", names, None, "sol")
    more = load("04_flash_attention", names, _fwd04_pairs(), "more configs")
    for n, causal in fwd_shapes:
        q, k, v = qkv(torch.Generator(DEV).manual_seed(n), bh[0], bh[1], n, 128, device=DEV)
        ref_o, _ = attention_reference(q[:1, :2], k[:1, :2], v[:1, :2], causal, dtype=torch.float32)
        fns = {"solution": lambda: sol["flash_attention"](q, k, v, causal),
               "more configs": lambda: more["flash_attention"](q, k, v, causal),
               "cuDNN": lambda: attention_cudnn(q, k, v, causal)}
        errs = {kk: rel_err(fns[kk]()[0][:1, :2], ref_o) for kk in ("solution", "more configs")}
        course, paid = interleaved(fns, rounds), do_bench_ms(fns)
        fl = attention_flops(bh[0], bh[1], n, 128, causal)
        row = {"N": n, "causal": causal, "errors": errs, "course_ms": {kk: course[kk] for kk in fns},
               "do_bench_ms": paid, "tflops": {kk: fl / course[kk] / 1e9 for kk in fns},
               "configs": {kk: str(ns["flash_fwd_kernel"].best_config) for kk, ns in (("solution", sol),
                                                                                      ("more configs", more))}}
        res["fwd04"].append(row)
        print(f"  attention fwd D=128 N={n} causal={causal}: TFLOP/s " + ", ".join(
            f"{kk} {t:.0f}" for kk, t in row["tflops"].items()) + f"; picked {row['configs']['more configs']}",
            flush=True)
        del q, k, v
    return res


# ---------------------------------------------------------------- report

def targets(res: dict) -> dict:
    out = {}
    if "ln" in res:
        out["ln_backward_host_us"] = max(r["times"]["after"]["host_us"] for r in res["ln"]["rows"])
    if "matmul" in res:
        rows = res["matmul"]["rows"]
        mis = [r for r in rows if r["shape"] != [1024, 1024, 1024]]
        if mis:
            out["matmul_misaligned_vs_cublas"] = min(min(r["after_vs_cublas"], r["after_do_bench_vs_cublas"])
                                                     for r in mis)
        sq = [r for r in rows if r["shape"] == [1024, 1024, 1024]]
        if sq:
            out["matmul_1024_do_bench_vs_cublas"] = sq[0]["after_do_bench_vs_cublas"]
    if "step" in res:
        out["step_do_bench_vs_sdpa"] = res["step"]["after_do_bench_vs_sdpa"]
        out["step_do_bench_vs_compile"] = res["step"]["after_do_bench_vs_compile"]
    return {k: {"value": v, "target": TARGETS[k],
                "met": v <= TARGETS[k] if k.endswith("_us") else v >= TARGETS[k]} for k, v in out.items()}


def write(res: dict, out: pathlib.Path) -> None:
    from kernellab.report import _header, md_table
    res["targets"] = targets(res)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fast_check.json").write_text(json.dumps(res, indent=1, default=str))
    lines = ["# Issue 56 A/B: host time, misaligned matmul, lesson 07's step with launches paid", ""] + _header()
    lines += ["", "Before: the solution with Triton's own launch path (and, lesson 02, no alignment hints and no "
              "padding; lesson 07, its launch plan worked out and its buffers allocated with torch.empty(shape, "
              "dtype=, device=) on every call). After: the solution as committed. course = the course timer (host "
              "hidden); do_bench = launches paid; host = host time per call, the GPU not waited on.", "",
              "## Targets", ""]
    lines += md_table(["target", "value", "threshold", "met"], [
        [k, f"{v['value']:.3f}", ("<= " if k.endswith("_us") else ">= ") + f"{v['target']:g}",
         "yes" if v["met"] else "**no**"] for k, v in res["targets"].items()])
    if "matmul" in res:
        lines += ["", "## Lesson 02 matmul (fp16) vs cuBLAS", ""]
        lines += md_table(["M, N, K", "x cuBLAS before / after", "x cuBLAS do_bench before / after",
                           "ms course before / after / cuBLAS", "host us before / after / cuBLAS", "rel. err after",
                           "config after"], [
            [", ".join(map(str, r["shape"])), f"{r['before_vs_cublas']:.2f} / {r['after_vs_cublas']:.2f}",
             f"{r['before_do_bench_vs_cublas']:.2f} / {r['after_do_bench_vs_cublas']:.2f}",
             " / ".join(f"{r['times'][v]['course_ms']:.4f}" for v in ("before", "after", "cublas")),
             " / ".join(f"{r['times'][v]['host_us']:.1f}" for v in ("before", "after", "cublas")),
             f"{r['errors']['after']:.1e}", r["configs"]["after"].replace(", num_ctas: 1", "").replace(", maxnreg: None", "")]
            for r in res["matmul"]["rows"]])
        lines += ["", f"Direct launches of the after kernel: {res['matmul']['fast_launch_stats']}"]
    if "ln" in res:
        lines += ["", f"## Lesson 07 LayerNorm backward, {LN_ROWS} rows, fp16", ""]
        lines += md_table(["d", "host us before / after", "do_bench us before / after", "course us before / after",
                           "outputs identical", "rel. err after"], [
            [r["d"], f"{r['times']['before']['host_us']:.1f} / {r['times']['after']['host_us']:.1f}",
             f"{r['times']['before']['do_bench_ms'] * 1e3:.1f} / {r['times']['after']['do_bench_ms'] * 1e3:.1f}",
             f"{r['times']['before']['course_ms'] * 1e3:.1f} / {r['times']['after']['course_ms'] * 1e3:.1f}",
             "yes" if r["after_equals_before"] else "**no**", f"{r['errors']['after']:.1e}"] for r in res["ln"]["rows"]])
        lines += ["", f"Direct launches: {res['ln']['fast_launch_stats']}"]
        prices = res["ln"].get("host_prices_us")
        if prices:
            lines += ["", "### What the host's pieces of a call cost (us per call, GPU not waited on)", ""]
            floor = _ln_floor_us(prices)
            if floor is not None:
                lines += [f"The floor under the LayerNorm backward's host time, two launches through kl.fast and four "
                          f"allocations with new_empty, before any other line of its wrapper: {floor:.1f} us on this "
                          "host.", ""]
            lines += md_table(["piece", "host us"], [[k, f"{v:.1f}"] for k, v in prices.items()])
    if "step" in res:
        st = res["step"]
        lines += ["", f"## Lesson 07 training step ({st['shape']}; compile and first calls {st['compile_s']:.0f} s)", ""]
        lines += [f"After against before (output and all 13 gradients, worst relative difference): "
                  f"{st.get('after_vs_before_rel_error', float('nan')):.1e}", ""]
        lines += md_table(["version", "course ms", "do_bench ms", "host enqueue ms"], [
            [k, f"{v['course_ms']:.3f}", f"{v['do_bench_ms']:.3f}", f"{v['host_enqueue_ms']:.3f}"]
            for k, v in st["times"].items()])
    if "candidates" in res:
        c = res["candidates"]
        lines += ["", "## Candidates: lesson 03's add + LayerNorm at 768 columns (16 Mi fp16 elements)", ""]
        lines += md_table(["version", "course ms", "do_bench ms", "x torch.compile (course)", "rel. error"], [
            [k, f"{v['course_ms']:.4f}", f"{v['do_bench_ms']:.4f}", f"{v['vs_compile']:.3f}", f"{v['rel_error']:.1e}"]
            for k, v in c["ln03"].items()])
        lines += ["", "## Candidates: lesson 04's forward at D=128 (B=4, H=32) with more configurations", ""]
        lines += md_table(["N", "causal", "TFLOP/s solution / more configs / cuDNN", "do_bench ms solution / more / cuDNN",
                           "picked (more configs)"], [
            [r["N"], "yes" if r["causal"] else "no",
             " / ".join(f"{r['tflops'][k]:.0f}" for k in ("solution", "more configs", "cuDNN")),
             " / ".join(f"{r['do_bench_ms'][k]:.3f}" for k in ("solution", "more configs", "cuDNN")),
             r["configs"]["more configs"].replace(", num_ctas: 1", "").replace(", maxnreg: None", "")]
            for r in c["fwd04"]])
    if res.get("errors"):
        lines += ["", "## Errors", ""] + [f"- {k}: {v}" for k, v in res["errors"].items()]
    (out / "fast_check.md").write_text("\n".join(lines) + "\n")


def run_gpu(out: pathlib.Path, parts: list) -> dict:
    from kernellab.device import fingerprint
    print(fingerprint(), flush=True)
    res = {"device": DEVICE.name, "torch": torch.__version__, "triton": __import__("triton").__version__,
           "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "errors": {}, "seconds": {}}
    todo = {"matmul": part_matmul, "ln": part_ln, "step": part_step, "candidates": part_candidates}
    for name in parts:
        t0 = time.perf_counter()
        print(f"[{name}]", flush=True)
        try:
            res[name] = todo[name]()
        except Exception as exc:  # noqa: BLE001 - the other parts still run; the report says what failed
            import traceback
            traceback.print_exc()
            res["errors"][name] = f"{type(exc).__name__}: {exc}"[:2000]
        res["seconds"][name] = time.perf_counter() - t0
        print(f"[{name}] {res['seconds'][name]:.0f} s", flush=True)
        write(res, out)
        torch.cuda.empty_cache()
    print((out / "fast_check.md").read_text())
    return res


# ---------------------------------------------------------------- CPU check

def _misaligned_loads_cell() -> str:
    """The solution's configs and matmul cells as one source (kl replaced by what the compiler needs)."""
    from kernellab.grading.instructor.submissions import read, solution_texts
    from kernellab.paths import repo_root
    nb = read(repo_root() / "solutions" / "02_tiled_matmul" / "02_tiled_matmul.ipynb")
    configs = next(c.source for c in nb.cells if c.cell_type == "code" and "CONFIGS = [" in c.source)
    return configs + "\n\n" + solution_texts(nb)["matmul_code"]


COMPILE_CHILD = r'''
import importlib.util, json, os, re, sys, tempfile, types
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
HEAD = """import types
import triton
import triton.language as tl
kl = types.SimpleNamespace(autotune=lambda configs, key: (lambda fn: fn), fast=lambda k: k,
                           tuning=types.SimpleNamespace(show_configs=lambda c: None))
"""
path = os.path.join(tempfile.mkdtemp(), "kl_matmul_cell.py")  # triton.jit reads its kernels' source from a file
with open(path, "w") as f:
    f.write(HEAD + sys.stdin.read())
spec = importlib.util.spec_from_file_location("kl_matmul_cell", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
ns = vars(mod)
fn = ns["matmul_kernel"]
names = fn.arg_names
out = {}
# 3000 x 5000 x 1500: K = 1500 (4 | K), N = 5000 (8 | N); A (3000, 1500), B (1500, 5000), C (3000, 5000), row-major
for label, align in (("before", (1, 1, 1)), ("after", (ns["_align"](1500, 1500), ns["_align"](5000, 5000),
                                                          ns["_align"](5000, 5000)))):
    const = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, BIAS_GELU=False, stride_ak=1, stride_bn=1,
                 stride_cn=1, A_ALIGN=align[0], B_ALIGN=align[1], C_ALIGN=align[2])
    sig = {n: ("constexpr" if n in const else "*fp16" if n.endswith("_ptr") else "i32") for n in names}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in names if n.endswith("_ptr")}
    k = triton.compile(ASTSource(fn, sig, const, attrs), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=8, num_stages=3))
    ptx = k.asm["ptx"]
    out[label] = {"align": align, "scalar_loads": len(re.findall(r"ld\.global(?:\.\w+)*\.b16 ", ptx)),
                  "cp_async": {s: len(re.findall(r"cp\.async\.c[ag]\.shared\.global \[[^\]]*\], \[[^\]]*\], " + s, ptx))
                               for s in ("0x4", "0x8", "0x10")},
                  "vector_stores": len(re.findall(r"st\.global\.v4", ptx))}
print(json.dumps(out))
'''


def cpu_compile_check() -> dict:
    """Lesson 02's kernel compiled for sm_90 (no GPU needed) at 3000 x 5000 x 1500's specialisation, before and
    after the alignment hints: how its A and B tiles are loaded. In a child process with the interpreter off."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "KERNELLAB_FORCE_CPU")}
    env["TRITON_INTERPRET"] = "0"
    p = subprocess.run([sys.executable, "-c", COMPILE_CHILD], input=_misaligned_loads_cell(), capture_output=True,
                       text=True, env=env, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"compiling for sm_90 failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def cpu_check() -> dict:
    """Everything but the timing, on the CPU: the before/after variants build (each edit applies) and run in the
    interpreter against float64, after equals before where it must, the lesson 02 kernel's loads for sm_90, and the
    report writer on the results."""
    from kernellab.lessons.l07_ship_it import problems as L
    res = {}
    names = ("matmul",)
    before, after = load("02_tiled_matmul", names, BEFORE_02, "before"), load("02_tiled_matmul", names, None, "after")
    g = torch.Generator().manual_seed(0)
    worst = 0.0
    # K and N divisible by 4 or 8 but not 16 (the alignment hints at work), odd, and a transposed A
    for m, n, k in ((30, 40, 12), (17, 24, 20), (33, 36, 44), (9, 13, 7), (64, 72, 40)):
        a, b = torch.randn(m, k, generator=g).half(), torch.randn(k, n, generator=g).half()
        for aa in (a, a.t().contiguous().t()):
            ref = aa.double() @ b.double()
            for ns in (before, after):
                worst = max(worst, rel_err(ns["matmul"](aa, b), ref))
    assert worst < 2e-3, f"matmul relative error {worst:.1e}"
    aligns = {(m, n, k): (after["_align"](k, k), after["_align"](n, n)) for m, n, k in ((30, 40, 12), (33, 36, 44))}
    assert aligns == {(30, 40, 12): (4, 8), (33, 36, 44): (4, 4)}, aligns
    res["matmul_worst_rel_error"] = worst
    names = ("add_layernorm_backward",)
    lb, la = (load("07_ship_it", names, BEFORE_07, "before")["add_layernorm_backward"],
              load("07_ship_it", names, None, "after")["add_layernorm_backward"])
    for rows, d in ((37, 96), (8, 64)):
        inputs = L.ln_inputs(rows, d, seed=d)
        ob, oa = lb(*inputs), la(*inputs)
        assert all(torch.equal(x, y) for x, y in zip(ob, oa)), "LayerNorm backward: after differs from before"
        err = max(rel_err(gg, r) for gg, r in zip(oa, L.ln_grads(*inputs, dtype=torch.float64)))
        assert err < 1e-2, f"LayerNorm backward relative error {err:.1e}"
    res["ln_backward_identical"] = True
    blocks = [load("07_ship_it", ("block_forward",), pairs, tag)["block_forward"]
              for pairs, tag in ((BEFORE_07, "before"), (None, "after"))]
    s = L.Shape(1, 40, 64, 2, 128)
    x, params, dout, H = L.unpack(L.block_inputs(torch.Generator().manual_seed(5), s, device="cpu"))
    got = [L.with_grads(blk, x, params, dout, H) for blk in blocks]  # the output, dx and the 12 weights' gradients
    worst = max(rel_err(g0, g1) for g0, g1 in zip(*got))
    assert worst < 1e-3, f"the block's before and after variants differ: {worst:.1e}"
    res["block_before_vs_after_rel_error"] = worst
    from kernellab.lessons.l03_fused_softmax_layernorm import problems as L3
    inputs = L3._randn_ln((37, 96))(torch.Generator().manual_seed(3), "cpu")
    ref = L3.add_layernorm_reference(*inputs)
    for name, pairs in _ln03_variants().items():
        f = load("03_fused_softmax_layernorm", ("add_layernorm",), pairs, name)["add_layernorm"]
        err = rel_err(f(*inputs), ref)
        assert err < 1e-2, f"lesson 03 candidate {name}: relative error {err:.1e}"
    from kernellab.tuning import shared_bytes
    more = load("04_flash_attention", ("flash_attention",), _fwd04_pairs(), "more configs")
    configs = more["FWD_CONFIGS"]
    assert len(configs) == 7 + len(FWD04_EXTRA)
    too_big = [str(c) for c in configs if shared_bytes(c, head_dim=128) > 227 * 1024]
    assert not too_big, f"over an H100's shared memory at D=128: {too_big}"
    assert all(c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0 for c in configs)  # the causal diagonal's rule
    res["candidates_build"] = {"ln03": list(_ln03_variants()), "fwd04_configs": len(configs)}
    res["sm90_loads"] = cpu_compile_check()
    b, a = res["sm90_loads"]["before"], res["sm90_loads"]["after"]
    assert b["scalar_loads"] > 0 and sum(b["cp_async"].values()) == 0, b
    assert a["scalar_loads"] == 0 and a["cp_async"]["0x8"] > 0 and a["cp_async"]["0x10"] > 0, a
    res["dry_run"] = dry_run()
    import tempfile
    out = pathlib.Path(tempfile.mkdtemp())
    write(_made_up_result(), out)  # the report writer on results shaped as the GPU parts make them
    md = (out / "fast_check.md").read_text()
    assert "| 3000, 5000, 1500 | 0.40 / 0.90 |" in md and "| ln_backward_host_us | 15.000 | <= 20 | yes |" in md, md
    assert "| 4 rows, 8 warps | 0.0300 |" in md and "| 4096 | yes | 400 / 400 / 400 |" in md, md
    assert "before any other line of its wrapper: 18.0 us" in md, md  # 2 x 5.0 + 4 x 2.0
    return res


def dry_run() -> dict:
    """The GPU parts' own code on the CPU: tiny shapes, the interpreter, every timer replaced by a constant (so
    nothing here is a measurement); the report written from what they return."""
    import tempfile

    import kernellab.timing as T
    from kernellab.lessons.l07_ship_it import problems as L
    saved = {k: getattr(T, k) for k in ("interleaved", "do_bench_ms", "host_us", "host_enqueue_ms")}
    T.interleaved = lambda fns, rounds, hide_ms=None, timer=None: {k: 1.0 for k in fns}
    T.do_bench_ms = lambda fns, warmup=25, rep=100: {k: 1.0 for k in fns}
    T.host_us = lambda fn, n=50, rounds=7: 10.0
    T.host_enqueue_ms = lambda fns, n=20: {k: {"host_ms": 1.0, "wall_ms": 1.0} for k in fns}
    try:
        res = {"device": "CPU dry run", "errors": {}}
        res["matmul"] = part_matmul(shapes=((24, 40, 12), (9, 13, 7)))
        res["ln"] = part_ln(widths=(96,), rows=37)
        res["step"] = part_step(rounds=1, shape=L.Shape(1, 40, 64, 2, 128))
        res["candidates"] = part_candidates(rounds=1, ln_shape=(37, 96), fwd_shapes=((40, False), (40, True)),
                                           bh=(1, 1))
    finally:
        for k, v in saved.items():
            setattr(T, k, v)
    assert all(r["errors"]["after"] < 2e-3 for r in res["matmul"]["rows"]), res["matmul"]
    assert all(r["after_equals_before"] for r in res["ln"]["rows"]), res["ln"]
    assert res["step"]["after_vs_before_rel_error"] < 1e-3, res["step"]
    assert all(v["rel_error"] < 1e-2 for v in res["candidates"]["ln03"].values()), res["candidates"]
    out = pathlib.Path(tempfile.mkdtemp())
    write(res, out)
    return {"report_lines": len((out / "fast_check.md").read_text().splitlines())}


def _made_up_result() -> dict:
    """Numbers in the shape part_matmul, part_ln and part_step return (for the writer's check only)."""
    def t(course, paid, host):
        return {"course_ms": course, "do_bench_ms": paid, "host_us": host}
    mm = [{"shape": list(sh), "errors": {"before": 1e-4, "after": 1e-4}, "configs": {"before": "c", "after": "c"},
           "times": {"before": t(0.5, 0.5, 40.0), "after": t(0.22, 0.22, 8.0), "cublas": t(0.2, 0.2, 6.0)},
           "before_vs_cublas": 0.4, "after_vs_cublas": 0.9, "before_do_bench_vs_cublas": 0.4,
           "after_do_bench_vs_cublas": 0.9} for sh in MATMUL_SHAPES]
    ln = [{"d": d, "rows": LN_ROWS, "after_equals_before": True, "errors": {"before": 1e-3, "after": 1e-3},
           "times": {"before": t(0.01, 0.1, 100.0), "after": t(0.01, 0.015, 15.0)}} for d in LN_WIDTHS]
    step = {"shape": {"B": 4}, "compile_s": 30.0, "after_do_bench_vs_sdpa": 1.01, "after_do_bench_vs_compile": 1.1,
            "before_do_bench_vs_sdpa": 0.6, "before_do_bench_vs_compile": 0.7,
            "times": {k: dict(t(2.0, 2.0, 1900.0), host_enqueue_ms=1.9) for k in ("eager + SDPA", "yours")}}
    cand = {"ln03": {k: {"course_ms": 0.03, "do_bench_ms": 0.031, "vs_compile": 1.0, "rel_error": 1e-3}
                     for k in ["solution", *_ln03_variants(), "torch.compile"]},
            "fwd04": [{"N": n, "causal": c, "tflops": dict.fromkeys(("solution", "more configs", "cuDNN"), 400.0),
                       "do_bench_ms": dict.fromkeys(("solution", "more configs", "cuDNN"), 1.0),
                       "configs": {"solution": "c", "more configs": "c"}} for n, c in FWD04_SHAPES]}
    return {"device": "made up", "errors": {}, "matmul": {"rows": mm, "fast_launch_stats": {"fast": 3, "triton": 1}},
            "ln": {"rows": ln, "fast_launch_stats": {}, "host_prices_us": {"x.new_empty(shape)": 2.0,
                                                                         "kl.fast launch (one pointer)": 5.0}}, "step": step, "candidates": cand}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fast_check_out")
    ap.add_argument("--cpu-check", action="store_true")
    ap.add_argument("--parts", default="matmul,ln,step")
    args = ap.parse_args()
    if args.cpu_check:
        print(json.dumps(cpu_check(), indent=1))
        print("CPU CHECK PASSED")
        return 0
    if not DEVICE.on_gpu:
        print("fast_check.py needs a CUDA GPU (or --cpu-check).")
        return 2
    res = run_gpu(pathlib.Path(args.out), [p for p in args.parts.split(",") if p])
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
