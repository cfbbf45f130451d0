"""Lesson 10 on the GPU: the solution's grouped GEMM against the per-expert loop, ``torch._grouped_mm`` (where it
runs) and one dense cuBLAS matmul of the same FLOPs; the fused MoE MLP forward against a ``_grouped_mm`` + eager
SwiGLU + ``index_add`` pipeline and the per-expert loop; the grouped GEMM's backward against the loop's autograd.
Course timer (interleaved medians) and ``triton.testing.do_bench`` (launches paid) side by side. Called by
``kernellab bench --lessons 10_mixture_of_experts``; about 1-2 minutes on an H200."""
from __future__ import annotations

import json
import pathlib
import sys

import torch

from ...compare import rel_error_on_device
from ...device import DEVICE

LESSON = "10_mixture_of_experts"
# (tokens, experts, top_k, K, N): the two gate/up shapes and the small batch where the loop loses most
GEMM_SHAPES = [(8192, 64, 8, 2048, 1408), (8192, 8, 2, 4096, 14336), (256, 64, 8, 2048, 1408)]
MLP_SHAPES = [(256, 64, 8, 2048, 1408), (8192, 64, 8, 2048, 1408)]  # (tokens, experts, top_k, d_model, d_ff)
BWD_SHAPES = [(256, 64, 8, 2048, 1408), (8192, 64, 8, 2048, 1408)]
TARGETS = {"grouped_vs_grouped_mm": 0.95, "grouped_vs_dense": 0.8, "grouped_vs_loop_256": 3.0,
           "mlp_vs_grouped_mm_pipeline": 1.2, "bwd_vs_loop_256": 2.0,
           # section 8's persistent TMA kernel (sm_90+), held to the grouped GEMM's targets
           "persistent_vs_grouped_mm": 0.95, "persistent_vs_dense": 0.8}


def _time(fns: dict, rounds: int) -> tuple[dict, dict]:
    from ...timing import do_bench_ms, interleaved
    ms = interleaved(fns, rounds)
    return {k: ms[k] for k in fns}, do_bench_ms(fns, warmup=10, rep=50)


def _grouped_mm(x, w, offsets):
    """w already in the layout grouped_mm_layout found (prepared once, outside the timing, like any weights)."""
    return torch._grouped_mm(x, w, offs=offsets[1:])


def bench_gemm(grouped_matmul, rounds: int, quick: bool, persistent=None) -> list:
    """``persistent``: section 8's sm_90+ kernel, timed beside ``grouped_matmul`` where given."""
    from tqdm.auto import tqdm

    from .problems import as_grouped_mm_weight, grouped_inputs, grouped_mm_layout, loop_grouped_matmul
    out = []
    dtypes = [torch.float16] + ([torch.bfloat16] if DEVICE.supports_bf16() and not quick else [])
    for dtype in dtypes:
        layout = grouped_mm_layout(dtype)
        for tokens, experts, top_k, k, n in tqdm(GEMM_SHAPES, desc=f"grouped GEMM {str(dtype)[6:]}", file=sys.stdout):
            x, w, offsets = grouped_inputs(tokens, experts, top_k, k, n, torch.Generator().manual_seed(10), DEVICE.torch_device)
            x, w = x.to(dtype), w.to(dtype)
            dense_a = torch.randn(x.shape[0], k, device=DEVICE.torch_device).to(dtype)
            dense_b = torch.randn(k, n, device=DEVICE.torch_device).to(dtype)
            fns = {"yours": lambda: grouped_matmul(x, w, offsets), "loop": lambda: loop_grouped_matmul(x, w, offsets),
                   "dense": lambda: torch.matmul(dense_a, dense_b)}
            if persistent is not None:
                fns["persistent"] = lambda: persistent(x, w, offsets)
            if layout:
                w_gmm = as_grouped_mm_weight(w, layout)
                if _works(lambda: _grouped_mm(x, w_gmm, offsets)):
                    fns["_grouped_mm"] = lambda: _grouped_mm(x, w_gmm, offsets)
            ref = loop_grouped_matmul(x, w, offsets)
            err = rel_error_on_device(grouped_matmul(x, w, offsets), ref)
            if persistent is not None:
                err = max(err, rel_error_on_device(persistent(x, w, offsets), ref))
            ms, db = _time(fns, rounds)
            fl = 2 * x.shape[0] * k * n
            row = {"shape": [tokens, experts, top_k, k, n], "dtype": str(dtype)[6:], "rows": x.shape[0], "ms": ms,
                   "do_bench_ms": db, "tflops": {c: fl / t / 1e9 for c, t in ms.items()}, "rel_error_vs_loop": err,
                   "vs_loop": ms["loop"] / ms["yours"], "vs_dense": ms["dense"] / ms["yours"],
                   "vs_grouped_mm": ms["_grouped_mm"] / ms["yours"] if "_grouped_mm" in ms else None,
                   "do_bench_vs_loop": db["loop"] / db["yours"]}
            if persistent is not None:
                row["persistent_vs_dense"] = ms["dense"] / ms["persistent"]
                row["persistent_vs_grouped_mm"] = ms["_grouped_mm"] / ms["persistent"] if "_grouped_mm" in ms else None
            out.append(row)
            print({k_: row[k_] for k_ in ("shape", "dtype", "vs_loop", "vs_dense", "vs_grouped_mm")}, flush=True)
    return out


def _mlp_weights(tokens, experts, top_k, d, f, gen):
    from .problems import reference_route
    x = torch.randn(tokens, d, generator=gen).half().to(DEVICE.torch_device)
    w_gate_up = (torch.randn(experts, d, 2 * f, generator=gen) / d ** 0.5).half().to(DEVICE.torch_device)
    w_down = (torch.randn(experts, f, d, generator=gen) / f ** 0.5).half().to(DEVICE.torch_device)
    weights, idx = reference_route(torch.randn(tokens, experts, generator=gen), top_k)[:2]
    return x, w_gate_up, w_down, idx.to(torch.int32).to(DEVICE.torch_device), weights.float().to(DEVICE.torch_device)


def grouped_mm_pipeline(x, w_gate_up, w_down, experts, weights):
    """The MoE MLP from PyTorch's parts: sort the slots by expert, gather, _grouped_mm, eager SwiGLU, _grouped_mm,
    weight and index_add back."""
    top_k = experts.shape[1]
    flat = experts.reshape(-1)
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=w_gate_up.shape[0]), 0).to(torch.int32)
    tokens = order // top_k
    gu = torch._grouped_mm(x[tokens], w_gate_up, offs=offs)
    f = gu.shape[1] // 2
    y = torch._grouped_mm((torch.nn.functional.silu(gu[:, :f]) * gu[:, f:]).contiguous(), w_down, offs=offs)
    y = y * weights.reshape(-1)[order, None].to(y.dtype)
    return torch.zeros_like(x).index_add_(0, tokens, y)


def loop_pipeline(x, w_gate_up, w_down, experts, weights):
    """The MoE MLP as a loop over experts (the per-expert baseline of the graded speed problem, whole layer)."""
    out = torch.zeros_like(x)
    f = w_gate_up.shape[2] // 2
    for e in range(w_gate_up.shape[0]):
        tok, slot = torch.nonzero(experts == e, as_tuple=True)
        if tok.numel():
            gu = x[tok] @ w_gate_up[e]
            y = (torch.nn.functional.silu(gu[:, :f]) * gu[:, f:]) @ w_down[e]
            out.index_add_(0, tok, y * weights[tok, slot, None].to(y.dtype))
    return out


def _works(fn) -> bool:
    """fn() runs here (a baseline PyTorch may refuse on this GPU, dtype or version: its column is then empty)."""
    try:
        fn()
        if DEVICE.on_gpu:
            torch.cuda.synchronize()
        return True
    except Exception as e:  # noqa: BLE001
        print(f"  (skipped: {type(e).__name__}: {str(e)[:120]})")
        return False


def bench_mlp(moe_mlp, rounds: int, quick: bool, layout: str | None, gmm_dtype=torch.float16) -> list:
    """``gmm_dtype``: the _grouped_mm pipeline's dtype (bf16 where this PyTorch's _grouped_mm takes no fp16: the
    same bytes and tensor-core rate, the nearest fair stand-in)."""
    from .problems import as_grouped_mm_weight, moe_flops, moe_reference
    out = []
    grouped_mm_ok = layout is not None
    for tokens, experts, top_k, d, f in MLP_SHAPES[:1 if quick else None]:
        args = _mlp_weights(tokens, experts, top_k, d, f, torch.Generator().manual_seed(11))
        fns = {"yours": lambda: moe_mlp(*args), "loop": lambda: loop_pipeline(*args)}
        if grouped_mm_ok:
            gmm_args = (args[0].to(gmm_dtype), as_grouped_mm_weight(args[1].to(gmm_dtype), layout),
                        as_grouped_mm_weight(args[2].to(gmm_dtype), layout), *args[3:])
            grouped_mm_ok = _works(lambda: grouped_mm_pipeline(*gmm_args))
        if grouped_mm_ok:
            fns["_grouped_mm + eager"] = lambda: grouped_mm_pipeline(*gmm_args)
        err = rel_error_on_device(moe_mlp(*args)[:64], moe_reference(args[0][:64], *args[1:3], args[3][:64],
                                                                    args[4][:64], dtype=torch.float32))
        ms, db = _time(fns, rounds)
        fl = moe_flops(tokens, top_k, d, f)
        row = {"shape": [tokens, experts, top_k, d, f], "ms": ms, "do_bench_ms": db,
               "tflops": {c: fl / t / 1e9 for c, t in ms.items()}, "rel_error": err,
               "vs_loop": ms["loop"] / ms["yours"],
               "vs_grouped_mm_pipeline": (ms["_grouped_mm + eager"] / ms["yours"] if grouped_mm_ok else None)}
        out.append(row)
        print({k_: row[k_] for k_ in ("shape", "vs_loop", "vs_grouped_mm_pipeline")}, flush=True)
    return out


def bench_backward(grouped_matmul_backward, rounds: int, quick: bool, layout: str | None,
                   gmm_dtype=torch.float16) -> list:
    from .problems import as_grouped_mm_weight, grouped_inputs
    grouped_mm_ok = layout is not None
    out = []
    for tokens, experts, top_k, k, n in BWD_SHAPES[:1 if quick else None]:
        x, w, offsets = grouped_inputs(tokens, experts, top_k, k, n, torch.Generator().manual_seed(12), DEVICE.torch_device)
        dy = torch.randn(x.shape[0], n, device=DEVICE.torch_device).half()
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        bounds = offsets.tolist()
        y_loop = torch.cat([xg[bounds[e]:bounds[e + 1]] @ wg[e] for e in range(experts)])
        fns = {"yours": lambda: grouped_matmul_backward(x, w, offsets, dy),
               "loop autograd": lambda: torch.autograd.grad(y_loop, (xg, wg), dy, retain_graph=True)}
        if grouped_mm_ok:
            xb = x.to(gmm_dtype).requires_grad_()
            wb = as_grouped_mm_weight(w.to(gmm_dtype), layout).detach().requires_grad_()
            dyb = dy.to(gmm_dtype)
            grouped_mm_ok = _works(lambda: torch.autograd.grad(_grouped_mm(xb, wb, offsets), (xb, wb), dyb))
        if grouped_mm_ok:
            y_gmm = _grouped_mm(xb, wb, offsets)
            fns["_grouped_mm autograd"] = lambda: torch.autograd.grad(y_gmm, (xb, wb), dyb, retain_graph=True)
        dx, dw = grouped_matmul_backward(x, w, offsets, dy)
        gx, gw = torch.autograd.grad(y_loop, (xg, wg), dy, retain_graph=True)
        ms, db = _time(fns, rounds)
        fl = 4 * x.shape[0] * k * n
        row = {"shape": [tokens, experts, top_k, k, n], "ms": ms, "do_bench_ms": db,
               "tflops": {c: fl / t / 1e9 for c, t in ms.items()},
               "rel_error": max(rel_error_on_device(dx, gx), rel_error_on_device(dw, gw)),
               "vs_loop": ms["loop autograd"] / ms["yours"],
               "vs_grouped_mm": ms["_grouped_mm autograd"] / ms["yours"] if grouped_mm_ok else None}
        out.append(row)
        print({k_: row[k_] for k_ in ("shape", "vs_loop", "vs_grouped_mm")}, flush=True)
    return out


def targets(res: dict) -> dict:
    """target -> met (True/False) on every shape it names; a target with no shape measured is left out."""
    def every(rows, ratio, key):
        rows = [r for r in rows if r.get(ratio) is not None]
        return all(r[ratio] >= TARGETS[key] for r in rows) if rows else None
    big = [r for r in res["gemm"] if r["shape"][0] == 8192]
    small = [r for r in res["gemm"] if r["dtype"] == "float16" and r["shape"][0] == 256]
    out = {"grouped_vs_grouped_mm": every(big, "vs_grouped_mm", "grouped_vs_grouped_mm"),
           "grouped_vs_dense": every(big, "vs_dense", "grouped_vs_dense"),
           "grouped_vs_loop_256": every(small, "vs_loop", "grouped_vs_loop_256"),
           "mlp_vs_grouped_mm_pipeline": every(res["mlp"], "vs_grouped_mm_pipeline", "mlp_vs_grouped_mm_pipeline"),
           "bwd_vs_loop_256": every([r for r in res["backward"] if r["shape"][0] == 256], "vs_loop", "bwd_vs_loop_256"),
           "persistent_vs_grouped_mm": every(big, "persistent_vs_grouped_mm", "persistent_vs_grouped_mm"),
           "persistent_vs_dense": every(big, "persistent_vs_dense", "persistent_vs_dense")}
    return {k: v for k, v in out.items() if v is not None}


def bench_lesson10(quick: bool = False) -> dict | None:
    if not DEVICE.on_gpu:
        print("Lesson 10's benchmark needs a CUDA GPU.")
        return None
    from ...notebook_cells import load_solution
    from .problems import grouped_mm_layout
    names = ("grouped_matmul", "moe_mlp", "grouped_matmul_backward")
    sol = load_solution(LESSON, names + (("grouped_matmul_persistent",) if DEVICE.supports_tma() else ()))
    rounds = 3 if quick else 5
    gmm_dtype = torch.float16
    layout = grouped_mm_layout(gmm_dtype)
    if layout is None and DEVICE.supports_bf16() and grouped_mm_layout(torch.bfloat16):
        gmm_dtype = torch.bfloat16
        layout = grouped_mm_layout(gmm_dtype)
    res = {"device": DEVICE.name, "quick": quick, "rounds": rounds, "grouped_mm": layout is not None,
           "grouped_mm_layout": layout, "grouped_mm_pipeline_dtype": str(gmm_dtype)[6:]}
    res["gemm"] = bench_gemm(sol["grouped_matmul"], rounds, quick, sol.get("grouped_matmul_persistent"))
    res["mlp"] = bench_mlp(sol["moe_mlp"], rounds, quick, layout, gmm_dtype)
    res["backward"] = bench_backward(sol["grouped_matmul_backward"], rounds, quick, layout, gmm_dtype)
    res["targets_met"] = targets(res)
    return res


def _ms(row, key):
    v = row["ms"].get(key)
    return f"{v:.3f}" if v is not None else "-"


def _x(v):
    return f"{v:.2f}" if v is not None else "-"


def write_lesson10(res: dict | None, out: pathlib.Path) -> None:
    if res is None:
        return
    from ...report import TIMING, _header, md_table
    lines = ["# Lesson 10 benchmark: grouped GEMM and the MoE MLP", ""] + _header()
    lines += ["", TIMING + " do_bench columns: `triton.testing.do_bench` medians, launch cost included.",
              "" if res["grouped_mm"] else "`torch._grouped_mm` did not run here (it needs sm_90+ and a PyTorch that "
              "has it): its columns are empty.", ""]
    lines += ["## Targets", ""]
    lines += md_table(["target", "threshold", "met"], [[k, f">= {TARGETS[k]:g}x", "yes" if v else "**no**"]
                                                     for k, v in res["targets_met"].items()])
    lines += ["", "## Grouped GEMM (one projection: tokens x top-k rows, K -> N per expert)", ""]
    if any("persistent" in r["ms"] for r in res["gemm"]):
        lines += ["`yours` is the graded `grouped_matmul` (every GPU); `persistent` is section 8's sm_90+ kernel (one "
                  "program per SM, TMA loads).", ""]
    lines += md_table(["tokens, E, top-k, K->N", "dtype", "yours ms", "persistent ms", "loop ms", "_grouped_mm ms",
                       "dense ms", "x loop", "x _grouped_mm (yours / persistent)", "x dense (yours / persistent)",
                       "yours TFLOP/s", "do_bench yours / persistent / loop / _grouped_mm ms", "rel. error"], [
        [f"{r['shape'][0]}, {r['shape'][1]}, {r['shape'][2]}, {r['shape'][3]}->{r['shape'][4]}", r["dtype"],
         _ms(r, "yours"), _ms(r, "persistent"), _ms(r, "loop"), _ms(r, "_grouped_mm"), _ms(r, "dense"),
         _x(r["vs_loop"]), f"{_x(r['vs_grouped_mm'])} / {_x(r.get('persistent_vs_grouped_mm'))}",
         f"{_x(r['vs_dense'])} / {_x(r.get('persistent_vs_dense'))}", f"{r['tflops']['yours']:.0f}",
         " / ".join(f"{r['do_bench_ms'][k]:.3f}" if k in r["do_bench_ms"] else "-"
                    for k in ("yours", "persistent", "loop", "_grouped_mm")),
         f"{r['rel_error_vs_loop']:.1e}"] for r in res["gemm"]])
    lines += ["", "## MoE MLP forward, fp16 (routing given; gate/up + SwiGLU, down, weighted combine)", ""]
    if res.get("grouped_mm_pipeline_dtype") == "bfloat16":
        lines += ["This PyTorch's `_grouped_mm` takes no fp16 here: its pipeline (forward and backward) runs in bf16, "
                  "the same bytes and tensor-core rate.", ""]
    lines += md_table(["tokens, E, top-k, d_model, d_ff", "yours ms", "_grouped_mm + eager ms", "loop ms",
                       "x _grouped_mm pipeline", "x loop", "do_bench yours / pipeline / loop ms", "rel. error"], [
        [", ".join(map(str, r["shape"])), _ms(r, "yours"), _ms(r, "_grouped_mm + eager"), _ms(r, "loop"),
         _x(r["vs_grouped_mm_pipeline"]), _x(r["vs_loop"]),
         " / ".join(f"{r['do_bench_ms'][k]:.3f}" if k in r["do_bench_ms"] else "-"
                    for k in ("yours", "_grouped_mm + eager", "loop")), f"{r['rel_error']:.1e}"] for r in res["mlp"]])
    lines += ["", "## Grouped GEMM backward (dX and dW), fp16", ""]
    lines += md_table(["tokens, E, top-k, K->N", "yours ms", "loop autograd ms", "_grouped_mm autograd ms", "x loop",
                       "x _grouped_mm", "do_bench yours / loop ms", "rel. error"], [
        [", ".join(map(str, r["shape"])), _ms(r, "yours"), _ms(r, "loop autograd"), _ms(r, "_grouped_mm autograd"),
         _x(r["vs_loop"]), _x(r["vs_grouped_mm"]),
         f"{r['do_bench_ms']['yours']:.3f} / {r['do_bench_ms']['loop autograd']:.3f}", f"{r['rel_error']:.1e}"]
        for r in res["backward"]])
    (out / "lesson10.md").write_text("\n".join(lines) + "\n")
    (out / "lesson10.json").write_text(json.dumps(res, indent=1, default=str))
