"""Lesson 01 on the GPU: the solution add against torch's add and a plain copy over sizes, the fused
silu_gate against the eager chain and torch.compile, and a bandwidth sweep. Called by ``kernellab bench``."""
from __future__ import annotations

import json
import pathlib
import sys

import torch

from ...device import DEVICE
from ...notebook_cells import load_solution
from ...report import TIMING, _header, md_table, paid_table, save_roofline
from ...sweeps import measure_sweep, plot_sweep
from ...timing import add_launch_paid, interleaved


def bench_lesson01(quick: bool = False) -> dict:
    from tqdm.auto import tqdm

    from ...ceilings import measure_ceilings
    from .problems import silu_gate_eager
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
        fns = {"solution": lambda: add(x, y), "torch": lambda: torch.add(x, y), "copy": lambda: dst.copy_(src)}
        t = interleaved(fns, rounds)
        gb = 3 * n * 4 / 1e9
        row = {"n": n, **{f"{k}_ms": t[k] for k in ("solution", "torch", "copy")},
               "solution_gbps": gb / (t["solution"] * 1e-3), "torch_gbps": gb / (t["torch"] * 1e-3),
               "copy_gbps": 2 * m * 4 / 1e9 / (t["copy"] * 1e-3)}
        row["vs_torch"] = row["solution_gbps"] / row["torch_gbps"]
        row["vs_copy"] = row["solution_gbps"] / row["copy_gbps"]
        out["add"].append(add_launch_paid(row, fns, base="torch"))
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
        out["silu_gate"].append(add_launch_paid(row, fns, base="eager"))
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
    n_of = lambda r: f"2^{r['n'].bit_length() - 1}"  # noqa: E731
    lines += paid_table("add, fp32", res["add"], "n", n_of, ["solution", "torch", "copy"])
    lines += paid_table("silu_gate, fp16", res["silu_gate"], "n", n_of, ["solution", "eager", "torch.compile"])
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
