"""Lesson 06 on the GPU: the transformer block eager, with SDPA, under torch.compile and with the course's
kernels (FlashAttention and add + LayerNorm from the lesson 06 solution), forward and training step; and
the profiles before and after. Called by ``kernellab bench``."""
from __future__ import annotations

import json
import pathlib

import torch

from ...device import DEVICE
from ...timing import STEP_HOST_MS

LESSON = "06_profile_first"


def _rows(rows, ridge, top=8) -> list[dict]:
    out = []
    for r in rows[:top]:
        out.append({"op": r.op, "calls": r.calls, "ms": r.ms, "share": r.share, "intensity": r.intensity,
                    "bound": r.bound(ridge),
                    "tflops": (r.flops / r.ms / 1e9) if r.flops else None, "kernel": r.kernel[:60]})
    return out


def bench_lesson06(quick: bool = False) -> dict:
    from ...ceilings import measure_ceilings
    from ...compare import rel_error
    from ...notebook_cells import load_solution
    from . import problems as L
    block_forward = load_solution(LESSON, ("block_forward",))["block_forward"]
    ridge = measure_ceilings(quiet=True).ridge or L._example_ridge()
    s = L.GPU_SHAPE
    dev = DEVICE.torch_device
    x, params, dout, H = L.unpack(L.block_inputs(torch.Generator(dev).manual_seed(2), s, torch.float16, dev))
    ref = L.block_reference(x, params, dout, H, dtype=torch.float32)
    got = L.with_grads(block_forward, x, params, dout, H)
    errors = {"output": rel_error(got[0], ref[0]), "dx": rel_error(got[1], ref[1]),
              "worst weight gradient": max(rel_error(g, r) for g, r in zip(got[2:], ref[2:]))}
    del ref, got
    res = {"shape": s._asdict(), "errors": errors, "ridge": ridge}
    res["profile_eager"] = _rows(L.profile_eager(show=False, plot=False), ridge)
    res["profile_yours"] = _rows(L.profile_step(block_forward, s), ridge)
    res["profile_yours_train"] = _rows(L.profile_step(block_forward, s, train=True), ridge, top=12)
    fns = L.contenders(block_forward)
    res["profile_sdpa_train"] = _rows(L.profile_step(fns["eager + SDPA"], s, train=True), ridge, top=12)
    res["times"] = L.time_block(fns, rounds=1 if quick else 5)
    from ...timing import host_us
    if not DEVICE.on_gpu:
        return res
    x, params, dout, H = L.unpack(L.block_inputs(torch.Generator(dev).manual_seed(1), s, torch.float16, dev))
    for n, f in fns.items():  # the host's time per training step, the GPU not waited on (timing.host_us)
        res["times"][n]["train_host_us"] = host_us(lambda f=f: L.with_grads(f, x, params, dout, H), n=5, rounds=3)
    return res


def write_lesson06(res: dict, out: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")

    from ...report import TIMING, _header, md_table
    from . import problems as L
    s = res["shape"]
    lines = ["# Lesson 06 benchmark: the transformer block, eager vs torch.compile vs the course's kernels", ""]
    lines += _header() + ["", TIMING, "",
                          f"Block: B={s['B']} N={s['N']} d={s['d']} H={s['H']} MLP {s['mlp']}, fp16, causal, post-norm. "
                          "Training step: forward, then autograd's gradients of x and all 12 weights.", "",
                          "## Time per call", ""]
    t = res["times"]
    base = t["eager"]
    lines += md_table(["version", "forward ms", "x eager", "fwd TFLOP/s", "training step ms", "x eager",
                       "step TFLOP/s", "step with launches (do_bench) ms", "step host ms"], [
        [n, f"{r['forward_ms']:.3f}", f"{base['forward_ms'] / r['forward_ms']:.2f}", f"{r['forward_tflops']:.0f}",
         f"{r['train_ms']:.3f}", f"{base['train_ms'] / r['train_ms']:.2f}", f"{r['train_tflops']:.0f}",
         f"{r['train_do_bench_ms']:.3f}" if "train_do_bench_ms" in r else "-",
         f"{r['train_host_us'] / 1e3:.3f}" if "train_host_us" in r else "-"]
        for n, r in t.items()])
    lines += ["", f"The training step is timed as block_train_speed times it: the GPU waits {STEP_HOST_MS:g} ms before "
              "each timed step while the host issues it, so the column is the step's GPU work; do_bench's column is "
              "what a program pays, launches included (a host-bound step reads more there)."]
    yours = t.get("yours")
    if yours:
        lines += ["", f"Graded bands (block_speed: forward >= 2.0 / 1.5 / 1.2 x eager; block_train_speed: >= 1.3 / "
                  f"1.15 / 1.05 x): the solution measured {base['forward_ms'] / yours['forward_ms']:.2f} x and "
                  f"{base['train_ms'] / yours['train_ms']:.2f} x here."]
        for key, what in (("forward_rounds", "forward"), ("train_rounds", "training step")):
            ratios = [b / y for b, y in zip(base.get(key, []), yours.get(key, []))]
            if len(ratios) > 1:
                lines.append(f"- {what}: the ratio in each of the {len(ratios)} rounds: "
                             + ", ".join(f"{r:.2f}" for r in ratios))
    e = res["errors"]
    lines += ["", f"Solution vs the fp32 eager block: relative error {e['output']:.1e} (output), {e['dx']:.1e} (dx), "
              f"{e['worst weight gradient']:.1e} (worst weight gradient).", ""]
    for key, title in (("profile_eager", "Profile of the eager block (forward)"),
                       ("profile_yours", "Profile of the block with the course's kernels (forward)"),
                       ("profile_yours_train", "Profile of a training step with the course's kernels"),
                       ("profile_sdpa_train", "Profile of a training step of the eager block with SDPA")):
        lines += [f"## {title}; ridge point {res['ridge']:.0f} FLOP/B", ""]
        lines += md_table(["op", "calls", "ms", "share", "FLOP/B", "bound", "TFLOP/s", "a kernel it launched"], [
            [r["op"], r["calls"], f"{r['ms']:.3f}", f"{r['share']:.1%}",
             "-" if r["intensity"] is None else f"{r['intensity']:.1f}", r["bound"] or "-",
             "-" if r["tflops"] is None else f"{r['tflops']:.1f}", f"`{r['kernel']}`" if r["kernel"] else ""]
            for r in res[key]])
        lines += [""]
    (out / "lesson06.md").write_text("\n".join(lines) + "\n")
    (out / "lesson06.json").write_text(json.dumps(res, indent=1))
    L.plot_block_times(t, title=f"the block, B={s['B']} N={s['N']} d={s['d']}, fp16, on {DEVICE.name}",
                       path=out / "lesson06_block.png")
