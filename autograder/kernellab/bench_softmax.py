"""Lesson 03 on the GPU: the solution softmax against torch.softmax, the eager chain and torch.compile
over row lengths; the online softmax on long rows; add + LayerNorm against eager and torch.compile.
Called by ``kernellab bench``."""
from __future__ import annotations

import json
import pathlib
import sys

import torch

from .compare import rel_error
from .device import DEVICE
from .timing import interleaved

LESSON = "03_fused_softmax_layernorm"
COLS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
ELEMENTS = 32 * 1024 * 1024
LN_COLS = (768, 1024, 4096, 8192)
LN_ELEMENTS = 16 * 1024 * 1024
ONLINE_COLS = (65536, 262144)
TARGETS = {"vs_torch": 1.0, "vs_eager": 5.0, "ln_vs_compile": 1.0}  # COURSE_DESIGN.md / issue 4


def _load(overrides: dict | None = None) -> dict:
    from .bench import load_solution
    return load_solution(LESSON, ("softmax", "online_softmax", "add_layernorm"), overrides)


def bench_lesson03(quick: bool = False) -> dict:
    from tqdm.auto import tqdm

    from .grading.submissions import read, solution_texts
    from .build import repo_root
    from .lessons.lesson03 import _compiled, _randn_ln, add_layernorm_eager, softmax_eager

    ns = _load()
    softmax, online, add_ln = ns["softmax"], ns["online_softmax"], ns["add_layernorm"]
    code = solution_texts(read(repo_root() / "solutions" / LESSON / f"{LESSON}.ipynb"))["softmax_code"]
    one_row = _load({"softmax_code": code.replace("rows = max(1, 4096 // block_c)", "rows = 1")})["softmax"]
    rounds = 3 if quick else 5
    comp_softmax, comp_ln = _compiled(softmax_eager), _compiled(add_layernorm_eager)
    out = {"softmax": [], "online": [], "layernorm": []}
    for dtype in (torch.float16, torch.float32):
        for c in tqdm(COLS if not quick else (512, 4096, 32768), desc=f"softmax {str(dtype)[6:]}", file=sys.stdout):
            x = (torch.randn(ELEMENTS // c, c, device="cuda") * 3).to(dtype)
            err = rel_error(softmax(x), torch.softmax(x.double(), dim=-1))
            fns = {"solution": lambda: softmax(x), "torch.softmax": lambda: torch.softmax(x, dim=-1),
                   "eager": lambda: softmax_eager(x), "torch.compile": lambda: comp_softmax(x),
                   "one row per program": lambda: one_row(x)}
            for f in fns.values():
                f()
            t = interleaved(fns, rounds)
            gb = 2 * x.numel() * x.element_size() / 1e9
            out["softmax"].append({"dtype": str(dtype)[6:], "cols": c, "rows": x.shape[0], "rel_error": err,
                                   **{f"{k}_gbps": gb / (t[k] * 1e-3) for k in fns},
                                   **{f"{k}_ms": t[k] for k in fns},
                                   "vs_torch": t["torch.softmax"] / t["solution"], "vs_eager": t["eager"] / t["solution"],
                                   "vs_compile": t["torch.compile"] / t["solution"]})
    for c in ONLINE_COLS:
        x = (torch.randn(ELEMENTS // c, c, device="cuda") * 3).half()
        err = rel_error(online(x), torch.softmax(x.double(), dim=-1))
        fns = {"online": lambda: online(x), "torch.softmax": lambda: torch.softmax(x, dim=-1)}
        for f in fns.values():
            f()
        t = interleaved(fns, rounds)
        gb = 2 * x.numel() * 2 / 1e9
        out["online"].append({"cols": c, "rows": x.shape[0], "rel_error": err,
                              **{f"{k}_gbps": gb / (t[k] * 1e-3) for k in fns}})
    for c in LN_COLS:
        x, res, w, b, eps = _randn_ln((LN_ELEMENTS // c, c))(torch.Generator("cuda").manual_seed(c), "cuda")
        err = rel_error(add_ln(x, res, w, b, eps), add_layernorm_eager(x.double(), res.double(), w.double(),
                                                                       b.double(), eps))
        fns = {"solution": lambda: add_ln(x, res, w, b, eps), "eager": lambda: add_layernorm_eager(x, res, w, b, eps),
               "torch.compile": lambda: comp_ln(x, res, w, b, eps)}
        for f in fns.values():
            f()
        t = interleaved(fns, rounds)
        gb = 3 * x.numel() * 2 / 1e9
        out["layernorm"].append({"cols": c, "rows": x.shape[0], "rel_error": err,
                                 **{f"{k}_gbps": gb / (t[k] * 1e-3) for k in fns}, **{f"{k}_ms": t[k] for k in fns},
                                 "vs_eager": t["eager"] / t["solution"], "vs_compile": t["torch.compile"] / t["solution"]})
    return out


ONE_ROW_NOTE = ("Note: from 8192 columns on, the \"one row per program\" variant launches the same kernel as the "
                "solution (one row per program there too), so any gap between those two columns there is how this "
                "table measures, not the kernel: treat differences of a few percent between columns as noise.")


def _met(value: float, target: float) -> str:
    return "yes" if value >= target else "**no**"


def write_lesson03(res: dict, out: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .bench import TIMING, _header, md_table, save_roofline
    from .lessons.lesson03 import plot_gbps
    lines = ["# Lesson 03 benchmark: fused softmax, online softmax, add + LayerNorm", ""] + _header() + [
        "", TIMING, "", "GB/s count the bytes a fused kernel must move (softmax: the input read once and the "
        "output written once; add + LayerNorm: x and the residual read, y written), for every contender.", "",
        f"## softmax, {ELEMENTS // 2 ** 20} Mi elements (targets: >= {TARGETS['vs_torch']} x torch.softmax, "
        f">= {TARGETS['vs_eager']} x the eager chain)", ""]
    lines += md_table(["dtype", "cols", "solution GB/s", "torch.softmax", "eager chain", "torch.compile",
                       "one row per program", "x torch", "met", "x eager", "met", "x compile", "rel. error"], [
        [r["dtype"], r["cols"], f"{r['solution_gbps']:,.0f}", f"{r['torch.softmax_gbps']:,.0f}", f"{r['eager_gbps']:,.0f}",
         f"{r['torch.compile_gbps']:,.0f}", f"{r['one row per program_gbps']:,.0f}", f"{r['vs_torch']:.3f}",
         _met(r["vs_torch"], TARGETS["vs_torch"]), f"{r['vs_eager']:.2f}", _met(r["vs_eager"], TARGETS["vs_eager"]),
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
         f"{r['vs_eager']:.2f}", f"{r['vs_compile']:.3f}", _met(r["vs_compile"], TARGETS["ln_vs_compile"]),
         f"{r['rel_error']:.1e}"] for r in res["layernorm"]])
    (out / "lesson03.md").write_text("\n".join(lines) + "\n")
    (out / "lesson03.json").write_text(json.dumps(res, indent=1))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    for ax, dt in zip(axes, ("float16", "float32")):
        rows = [{"cols": r["cols"], **{k: v for k, v in r.items() if k.endswith("_gbps")}}
                for r in res["softmax"] if r["dtype"] == dt]
        if rows:
            plot_gbps(rows, "cols", f"softmax {dt}, 32 Mi elements, {DEVICE.name}", ax=ax)
    fig.savefig(out / "lesson03_softmax.png", dpi=110)
    big = next(r for r in res["softmax"] if r["dtype"] == "float16" and r["cols"] == 1024) if any(
        r["cols"] == 1024 for r in res["softmax"]) else res["softmax"][0]
    ln = next((r for r in res["layernorm"] if r["cols"] == 4096), res["layernorm"][0])
    n, m = big["rows"] * big["cols"], ln["rows"] * ln["cols"]
    save_roofline([{"label": "softmax fp16", "flops": 5 * n, "bytes": 4 * n, "ms": big["solution_ms"]},
                   {"label": "add+LayerNorm fp16", "flops": 8 * m, "bytes": 6 * m, "ms": ln["solution_ms"]}],
                  f"Roofline of {DEVICE.name} with the lesson 03 solutions", out / "lesson03_roofline.png")
