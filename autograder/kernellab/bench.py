"""The course's GPU benchmark: solution kernels against their baselines, in one process.

``kernellab bench --out assets/bench`` writes lesson01.md (a table, with the GPU's name,
versions and date), lesson01.json (every number) and charts. Each comparison interleaves the
contenders round by round (A, B, A, B, ...) and reports the median of the round medians.
"""
from __future__ import annotations

import datetime
import json
import pathlib
import sys

import torch

from .build import repo_root
from .device import DEVICE, fingerprint
from .sweeps import measure_sweep, plot_sweep
from .timing import interleaved


def load_solution(lesson: str, names: tuple, overrides: dict | None = None) -> dict:
    """Execute the solution cells that define ``names`` (from solutions/); ``overrides`` (grade_id ->
    source) replaces some cells, to run a variant of the solution."""
    from .grading.notebook_code import exec_cells, grade_id, new_namespace, read_notebook, sources_for
    nb = read_notebook(repo_root() / "solutions" / lesson / f"{lesson}.ipynb")
    for c in nb.cells:
        if grade_id(c) in (overrides or {}):
            c.source = overrides[grade_id(c)]
    sources, missing = sources_for(nb, names)
    if missing:
        raise RuntimeError(missing)
    ns = new_namespace(lesson)
    exec_cells(sources, ns, tag=f"{lesson}-solution")
    return ns


def _header() -> list[str]:
    import triton
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [f"- GPU: **{DEVICE.name}** ({DEVICE.cc}, {DEVICE.sms} SMs), driver {DEVICE.driver}",
            f"- torch {torch.__version__}, triton {triton.__version__}, Python {sys.version.split()[0]}",
            f"- date: {now}", f"- fingerprint: `{fingerprint()}`"]


TIMING = ("Medians of interleaved rounds (CUDA events; before every run the L2 is flushed and the GPU kept "
          "busy while the host launches, so launch cost is not timed; see timing.bench).")


def md_table(columns: list, rows: list) -> list[str]:
    """Markdown table lines: a header, its rule, one line per row of already formatted cells."""
    return (["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def met(value: float, target: float) -> str:
    """A table cell saying whether a measured ratio meets its target."""
    return "yes" if value >= target else "**no**"


def save_roofline(points: list, title: str, path: pathlib.Path) -> None:
    from .roofline import plot_roofline
    ax = plot_roofline(points, title=title)
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=110)


def bench_lesson01(quick: bool = False) -> dict:
    from tqdm.auto import tqdm

    from .ceilings import measure_ceilings
    from .lessons.lesson01 import silu_gate_eager
    ns = load_solution("01_roofline_vector_add", ("add", "silu_gate"))
    add, silu_gate = ns["add"], ns["silu_gate"]
    ceil = measure_ceilings(refresh=True, quiet=True)
    rounds = 3 if quick else 7
    out = {"ceilings": {"copy_gbps": ceil.copy_gbps, "fp16_tflops": ceil.fp16_tflops}, "add": [], "silu_gate": [],
           "sweep": []}
    for k in tqdm([24, 25, 26, 27, 28], desc="add fp32", file=sys.stdout):
        n = 1 << k
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        m = (3 * n) // 2
        src, dst = torch.randn(m, device="cuda"), torch.empty(m, device="cuda")
        assert torch.equal(add(x, y), x + y)
        t = interleaved({"solution": lambda: add(x, y), "torch": lambda: torch.add(x, y),
                         "copy": lambda: dst.copy_(src)}, rounds)
        gb = 3 * n * 4 / 1e9
        row = {"n": n, **{f"{k}_ms": t[k] for k in ("solution", "torch", "copy")},
               "solution_gbps": gb / (t["solution"] * 1e-3), "torch_gbps": gb / (t["torch"] * 1e-3),
               "copy_gbps": 2 * m * 4 / 1e9 / (t["copy"] * 1e-3)}
        row["vs_torch"] = row["solution_gbps"] / row["torch_gbps"]
        row["vs_copy"] = row["solution_gbps"] / row["copy_gbps"]
        out["add"].append(row)
    for k in tqdm([24, 26, 27], desc="silu_gate fp16", file=sys.stdout):
        n = 1 << k
        x = torch.randn(n, device="cuda", dtype=torch.float16)
        y = torch.randn(n, device="cuda", dtype=torch.float16)
        err = ((silu_gate(x, y).double() - silu_gate_eager(x.double(), y.double())).norm()
               / silu_gate_eager(x.double(), y.double()).norm()).item()
        fns = {"solution": lambda: silu_gate(x, y), "eager": lambda: silu_gate_eager(x, y)}
        try:
            compiled = torch.compile(silu_gate_eager)
            compiled(x, y)
            fns["torch.compile"] = lambda: compiled(x, y)
        except Exception as exc:  # noqa: BLE001 - compile is a comparison, not a requirement
            print(f"torch.compile unavailable: {type(exc).__name__}: {exc}")
        t = interleaved(fns, rounds)
        row = {"n": n, "rel_error": err, **{f"{k}_ms": t[k] for k in fns},
               "speedup_vs_eager": t["eager"] / t["solution"],
               "solution_gbps": 3 * n * 2 / 1e9 / (t["solution"] * 1e-3)}
        if "torch.compile" in t:
            row["speedup_vs_compile"] = t["torch.compile"] / t["solution"]
        out["silu_gate"].append(row)
    out["sweep"] = measure_sweep(add, range(10, 29, 1 if not quick else 3))
    return out


def _write_lesson01(res: dict, out: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")

    c = res["ceilings"]
    lines = ["# Lesson 01 benchmark: vector add and the fused silu_gate", ""] + _header() + [
        f"- measured ceilings: copy {c['copy_gbps']:,.0f} GB/s (read + write), fp16 matmul "
        f"{c['fp16_tflops']:,.0f} TFLOP/s (torch, 8192^3)", "", TIMING, "",
        "## add, fp32 (target: >= 0.97 x torch add at 2^24-2^28, >= 0.97 x copy at 2^28)", ""]
    lines += md_table(["n", "solution GB/s", "torch add GB/s", "copy GB/s", "vs torch", "vs copy"], [
        [f"2^{r['n'].bit_length() - 1}", f"{r['solution_gbps']:,.0f}", f"{r['torch_gbps']:,.0f}",
         f"{r['copy_gbps']:,.0f}", f"{r['vs_torch']:.3f}", f"{r['vs_copy']:.3f}"] for r in res["add"]])
    lines += ["", "## silu_gate, fp16: one fused kernel vs the eager four-kernel chain", ""]
    lines += md_table(["n", "solution ms", "eager ms", "torch.compile ms", "vs eager", "vs compile", "solution GB/s"], [
        [f"2^{r['n'].bit_length() - 1}", f"{r['solution_ms']:.3f}", f"{r['eager_ms']:.3f}",
         f"{r.get('torch.compile_ms', float('nan')):.3f}", f"{r['speedup_vs_eager']:.2f}x",
         f"{r.get('speedup_vs_compile', float('nan')):.2f}x", f"{r['solution_gbps']:,.0f}"] for r in res["silu_gate"]])
    (out / "lesson01.md").write_text("\n".join(lines) + "\n")
    (out / "lesson01.json").write_text(json.dumps(res, indent=1))
    ax = plot_sweep(res["sweep"], c["copy_gbps"], f"Vector add on {DEVICE.name}: launch-bound, then "
                    "bandwidth-bound", label="solution add")
    ax.figure.savefig(out / "lesson01_bandwidth.png", dpi=110)
    big = res["add"][-1]
    sg = res["silu_gate"][-1]
    save_roofline([{"label": "add fp32", "flops": big["n"], "bytes": 12 * big["n"], "ms": big["solution_ms"]},
                   {"label": "silu_gate fp16", "flops": 6 * sg["n"], "bytes": 6 * sg["n"], "ms": sg["solution_ms"]}],
                  f"Roofline of {DEVICE.name} with the lesson 01 solutions", out / "roofline.png")


def run_bench(out_dir: str, quick: bool = False, lessons=None) -> None:
    if not DEVICE.on_gpu:
        print("kernellab bench needs a CUDA GPU; this machine has none.")
        return
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(fingerprint())
    lessons = lessons or ["01_roofline_vector_add", "02_tiled_matmul", "03_fused_softmax_layernorm",
                          "04_flash_attention", "06_profile_first"]
    if "01_roofline_vector_add" in lessons:
        _write_lesson01(bench_lesson01(quick), out)
        print((out / "lesson01.md").read_text())
    if "02_tiled_matmul" in lessons:
        from .bench_matmul import bench_lesson02, write_lesson02
        write_lesson02(bench_lesson02(quick), out)
        print((out / "lesson02.md").read_text())
    if "03_fused_softmax_layernorm" in lessons:
        from .bench_softmax import bench_lesson03, write_lesson03
        write_lesson03(bench_lesson03(quick), out)
        print((out / "lesson03.md").read_text())
    if "04_flash_attention" in lessons or "05_flash_attention_backward" in lessons:
        from .bench_attention import bench_attention, write_attention
        write_attention(bench_attention(quick), out)
        print((out / "lesson04.md").read_text() + (out / "lesson05.md").read_text())
    if "06_profile_first" in lessons:
        from .bench_block import bench_lesson06, write_lesson06
        write_lesson06(bench_lesson06(quick), out)
        print((out / "lesson06.md").read_text())
