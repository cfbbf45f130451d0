"""Lesson 03 on the GPU: the solution softmax against torch.softmax, the eager chain and torch.compile
over row lengths; the online softmax on long rows; add + LayerNorm against eager and torch.compile.
Called by ``kernellab bench``."""
from __future__ import annotations

import json
import pathlib

import torch

from ...device import DEVICE

LESSON = "03_fused_softmax_layernorm"
COLS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
ELEMENTS = 32 * 1024 * 1024
LN_COLS = (768, 1024, 4096, 8192)
LN_ELEMENTS = 16 * 1024 * 1024
ONLINE_COLS = (65536, 262144)
TARGETS = {"vs_torch": 1.0, "vs_eager": 5.0, "ln_vs_compile": 1.0}  # COURSE_DESIGN.md / issue 4


def _load(overrides: dict | None = None) -> dict:
    from ...notebook_cells import load_solution
    return load_solution(LESSON, ("softmax", "online_softmax", "add_layernorm"), overrides)


def bench_lesson03(quick: bool = False) -> dict:
    from ...grading.instructor.submissions import read, solution_texts
    from ...paths import repo_root
    from . import problems as L

    ns = _load()
    code = solution_texts(read(repo_root() / "solutions" / LESSON / f"{LESSON}.ipynb"))["softmax_code"]
    one_row = _load({"softmax_code": code.replace("rows = max(1, 4096 // block_c)", "rows = 1")})["softmax"]
    rounds = 3 if quick else 5
    out = {"softmax": [], "online": [], "layernorm": []}
    for dtype in (torch.float16, torch.float32):
        fns = L.softmax_contenders(ns["softmax"], "solution") | {"one row per program": one_row}
        for r in L.time_softmaxes(fns, COLS if not quick else COLS[::3], dtype, rounds, ELEMENTS,
                                  checked="solution", device=DEVICE.torch_device):
            out["softmax"].append(r | {"vs_torch": r["torch.softmax_ms"] / r["solution_ms"],
                                       "vs_eager": r["eager chain_ms"] / r["solution_ms"],
                                       "vs_compile": r["torch.compile(eager)_ms"] / r["solution_ms"]})
    online = {"online": ns["online_softmax"], "torch.softmax": lambda x: torch.softmax(x, dim=-1)}
    out["online"] = L.time_softmaxes(online, ONLINE_COLS, torch.float16, rounds, ELEMENTS, checked="online",
                                     device=DEVICE.torch_device)
    for r in L.time_add_layernorms(L.add_layernorm_contenders(ns["add_layernorm"], "solution"),
                                   [(LN_ELEMENTS // c, c) for c in LN_COLS], rounds, checked="solution",
                                   device=DEVICE.torch_device):
        out["layernorm"].append(r | {"vs_eager": r["eager_ms"] / r["solution_ms"],
                                     "vs_compile": r["torch.compile_ms"] / r["solution_ms"]})
    return out


ONE_ROW_NOTE = ("Note: from 8192 columns on, the \"one row per program\" variant launches the same kernel as the "
                "solution (one row per program there too), so any gap between those two columns there is how this "
                "table measures, not the kernel: treat differences of a few percent between columns as noise.")


def write_lesson03(res: dict, out: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ...report import TIMING, _header, md_table, met, paid_table, save_roofline
    from ...sweeps import plot_gbps
    lines = ["# Lesson 03 benchmark: fused softmax, online softmax, add + LayerNorm", ""] + _header() + [
        "", TIMING, "", "GB/s count the bytes a fused kernel must move (softmax: the input read once and the "
        "output written once; add + LayerNorm: x and the residual read, y written), for every contender.", "",
        f"## softmax, {ELEMENTS // 2 ** 20} Mi elements (targets: >= {TARGETS['vs_torch']} x torch.softmax, "
        f">= {TARGETS['vs_eager']} x the eager chain)", ""]
    lines += md_table(["dtype", "cols", "solution GB/s", "torch.softmax", "eager chain", "torch.compile",
                       "one row per program", "x torch", "met", "x eager", "met", "x compile", "rel. error"], [
        [r["dtype"], r["cols"], f"{r['solution_gbps']:,.0f}", f"{r['torch.softmax_gbps']:,.0f}",
         f"{r['eager chain_gbps']:,.0f}", f"{r['torch.compile(eager)_gbps']:,.0f}",
         f"{r['one row per program_gbps']:,.0f}", f"{r['vs_torch']:.3f}",
         met(r["vs_torch"], TARGETS["vs_torch"]), f"{r['vs_eager']:.2f}", met(r["vs_eager"], TARGETS["vs_eager"]),
         f"{r['vs_compile']:.2f}", f"{r['rel_error']:.1e}"] for r in res["softmax"]])
    lines += ["", ONE_ROW_NOTE, "", "## online softmax (one program per row, BLOCK 4096, two reads per element), fp16", ""]
    lines += md_table(["cols", "rows", "online GB/s", "torch.softmax GB/s", "rel. error"], [
        [r["cols"], r["rows"], f"{r['online_gbps']:,.0f}", f"{r['torch.softmax_gbps']:,.0f}", f"{r['rel_error']:.1e}"]
        for r in res["online"]])
    lines += ["", f"## residual add + LayerNorm, fp16, {LN_ELEMENTS // 2 ** 20} Mi elements "
              f"(target: >= {TARGETS['ln_vs_compile']} x torch.compile)", ""]
    lines += md_table(["cols", "rows", "solution GB/s", "eager GB/s", "torch.compile GB/s", "x eager", "x compile", "met",
                       "rel. error"], [
        [r["cols"], r["rows"], f"{r['solution_gbps']:,.0f}", f"{r['eager_gbps']:,.0f}", f"{r['torch.compile_gbps']:,.0f}",
         f"{r['vs_eager']:.2f}", f"{r['vs_compile']:.3f}", met(r["vs_compile"], TARGETS["ln_vs_compile"]),
         f"{r['rel_error']:.1e}"] for r in res["layernorm"]])
    lines += paid_table("softmax", res["softmax"], "dtype, cols", lambda r: f"{r['dtype']}, {r['cols']}",
                        ["solution", "torch.softmax", "eager chain", "torch.compile(eager)"])
    lines += paid_table("residual add + LayerNorm", res["layernorm"], "cols", lambda r: r["cols"],
                        ["solution", "eager", "torch.compile"])
    (out / "lesson03.md").write_text("\n".join(lines) + "\n")
    (out / "lesson03.json").write_text(json.dumps(res, indent=1))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    for ax, dt in zip(axes, ("float16", "float32")):
        rows = [{"cols": r["cols"], **{k: v for k, v in r.items() if k.endswith("_gbps")}}
                for r in res["softmax"] if r["dtype"] == dt]
        if rows:
            plot_gbps(rows, "cols", f"softmax {dt}, 32 Mi elements, {DEVICE.name}", ax=ax)
    fig.savefig(out / "lesson03_softmax.png", dpi=110)
    big = next((r for r in res["softmax"] if r["dtype"] == "float16" and r["cols"] == 1024), res["softmax"][0])
    ln = next((r for r in res["layernorm"] if r["cols"] == 4096), res["layernorm"][0])
    n, m = big["rows"] * big["cols"], ln["rows"] * ln["cols"]
    save_roofline([{"label": "softmax fp16", "flops": 5 * n, "bytes": 4 * n, "ms": big["solution_ms"]},
                   {"label": "add+LayerNorm fp16", "flops": 8 * m, "bytes": 6 * m, "ms": ln["solution_ms"]}],
                  f"Roofline of {DEVICE.name} with the lesson 03 solutions", out / "lesson03_roofline.png")
