"""Lesson 08 on a Hopper GPU: the solution's persistent TMA matmul against cuBLAS (square and misaligned), its FP8
matmul against torch._scaled_mm, its TMA attention against SDPA's cuDNN backend on lesson 04's grid, and lessons
04 and 05's solutions against cuDNN on the same grid. Every ratio is against a baseline timed in the same run,
interleaved round by round; ``triton.testing.do_bench`` (launches paid) beside the course timer. Called by
``kernellab bench --lessons 08_hopper``."""
from __future__ import annotations

import json
import pathlib
import sys

import torch

from ...compare import rel_error
from ...device import DEVICE

LESSON = "08_hopper"
TARGETS = {"attn_fwd_vs_cudnn": 0.95, "matmul_vs_cublas": 1.0, "matmul_misaligned": 0.8, "fp8_vs_scaled_mm": 0.9,
           "l04_fwd_vs_cudnn": 0.85, "l05_bwd_vs_cudnn": 0.85}
MM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
MISALIGNED = [(3000, 5000, 1500), (4095, 4097, 4093)]  # the second: every dimension odd, beside the graded one
FP8_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
ATTN_B, ATTN_H = 4, 32
ATTN_SHAPES = [(D, N, causal) for D in (64, 128) for N in (1024, 4096, 16384) for causal in (False, True)]


def _time(fns: dict, rounds: int) -> tuple[dict, dict, dict]:
    """Course timer (interleaved medians) and do_bench medians, name -> ms; the host's time per call, name -> us."""
    from ...timing import do_bench_ms, host_us, interleaved
    ms = interleaved(fns, rounds)
    host = {k: host_us(f, n=20, rounds=3) for k, f in fns.items()}
    return {k: ms[k] for k in fns}, do_bench_ms(fns, warmup=10, rep=50), host


def bench_matmuls(matmul, fp8_matmul, rounds: int, quick: bool) -> dict:
    from .problems import scaled_mm
    gen = torch.Generator("cuda").manual_seed(8)
    out = {"matmul": [], "fp8": []}
    for m, n, k in (MM_SHAPES + MISALIGNED)[:: 2 if quick else 1]:
        a = torch.randn(m, k, device="cuda", generator=gen).half()
        b = torch.randn(k, n, device="cuda", generator=gen).half()
        ms, db, host = _time({"yours": lambda: matmul(a, b), "cuBLAS": lambda: torch.matmul(a, b)}, rounds)
        ref = a[:256].float() @ b.float()
        fl = 2 * m * n * k
        row = {"shape": [m, n, k], "misaligned": (m, n, k) in MISALIGNED, "ms": ms, "do_bench_ms": db, "host_us": host,
               "tflops": {c: fl / t / 1e9 for c, t in ms.items()}, "vs_cublas": ms["cuBLAS"] / ms["yours"],
               "rel_error": rel_error(matmul(a, b)[:256], ref)}
        out["matmul"].append(row)
        print({"matmul": row["shape"], "x cuBLAS": round(row["vs_cublas"], 3)}, flush=True)
    for m, n, k in FP8_SHAPES[:1 if quick else None]:
        a = (torch.randn(m, k, device="cuda", generator=gen) * 4).to(torch.float8_e4m3fn)
        b_t = (torch.randn(n, k, device="cuda", generator=gen) * 4).to(torch.float8_e4m3fn)
        sa, sb = torch.tensor([0.05], device="cuda"), torch.tensor([1.5], device="cuda")
        ms, db, host = _time({"yours": lambda: fp8_matmul(a, b_t, sa, sb),
                              "_scaled_mm": lambda: scaled_mm(a, b_t, sa, sb)}, rounds)
        ref = (a[:256].float() @ b_t.float().t()) * (0.05 * 1.5)
        fl = 2 * m * n * k
        row = {"shape": [m, n, k], "ms": ms, "do_bench_ms": db, "host_us": host, "tflops": {c: fl / t / 1e9 for c, t in ms.items()},
               "vs_scaled_mm": ms["_scaled_mm"] / ms["yours"], "rel_error": rel_error(fp8_matmul(a, b_t, sa, sb)[:256], ref),
               "scaled_mm_rel_error": rel_error(scaled_mm(a, b_t, sa, sb)[:256], ref)}
        out["fp8"].append(row)
        print({"fp8": row["shape"], "x _scaled_mm": round(row["vs_scaled_mm"], 3)}, flush=True)
    return out


def bench_attention(tma_attention, l04_fwd, l05_bwd, rounds: int, quick: bool) -> list[dict]:
    from tqdm.auto import tqdm

    from ..attention import attention_flops, attention_reference, qkv
    from ..l05_flash_attention_backward.problems import sdpa_backward_of
    from .problems import attention_cudnn
    rows = []
    for D, N, causal in tqdm(ATTN_SHAPES[::4] if quick else ATTN_SHAPES, desc="attention", file=sys.stdout):
        q, k, v, do = qkv(torch.Generator("cuda").manual_seed(N + D), ATTN_B, ATTN_H, N, D, n=4, device="cuda")
        fl = attention_flops(ATTN_B, ATTN_H, N, D, causal)
        ms, db, host = _time({"yours (TMA)": lambda: tma_attention(q, k, v, causal),
                              "lesson 04": lambda: l04_fwd(q, k, v, causal),
                              "cuDNN": lambda: attention_cudnn(q, k, v, causal)}, rounds)
        ref_o, _ = attention_reference(q[:1, :2], k[:1, :2], v[:1, :2], causal, dtype=torch.float32)
        o, lse = l04_fwd(q, k, v, causal)
        inputs = [q, k, v, o, lse, do, causal]
        bms, bdb, bhost = _time({"lesson 05": lambda: l05_bwd(*inputs), "cuDNN": sdpa_backward_of(inputs, attention_cudnn)},
                         rounds)
        row = {"D": D, "N": N, "causal": causal, "fwd_ms": ms, "fwd_do_bench_ms": db, "fwd_host_us": host,
               "bwd_host_us": bhost,
               "fwd_tflops": {c: fl / t / 1e9 for c, t in ms.items()},
               "bwd_ms": bms, "bwd_do_bench_ms": bdb, "bwd_tflops": {c: 2.5 * fl / t / 1e9 for c, t in bms.items()},
               "tma_vs_cudnn": ms["cuDNN"] / ms["yours (TMA)"], "l04_vs_cudnn": ms["cuDNN"] / ms["lesson 04"],
               "l05_bwd_vs_cudnn": bms["cuDNN"] / bms["lesson 05"],
               "rel_error": rel_error(tma_attention(q[:1, :2], k[:1, :2], v[:1, :2], causal)[0], ref_o)}
        rows.append(row)
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items() if "vs" in k or k in "DN"},
              flush=True)
        del q, k, v, do, o, lse, inputs
        torch.cuda.empty_cache()
    return rows


def targets(res: dict) -> dict:
    mm = [r for r in res["matmuls"]["matmul"] if not r["misaligned"]]
    mis = [r for r in res["matmuls"]["matmul"] if r["shape"] == list(MISALIGNED[0])]
    at = res["attention"]
    return {
        "attn_fwd_vs_cudnn": all(r["tma_vs_cudnn"] >= TARGETS["attn_fwd_vs_cudnn"] for r in at),
        "matmul_vs_cublas": all(r["vs_cublas"] >= TARGETS["matmul_vs_cublas"] for r in mm),
        "matmul_misaligned": bool(mis) and all(r["vs_cublas"] >= TARGETS["matmul_misaligned"] for r in mis),
        "fp8_vs_scaled_mm": all(r["vs_scaled_mm"] >= TARGETS["fp8_vs_scaled_mm"] for r in res["matmuls"]["fp8"]),
        "l04_fwd_vs_cudnn": all(r["l04_vs_cudnn"] >= TARGETS["l04_fwd_vs_cudnn"] for r in at),
        "l05_bwd_vs_cudnn": all(r["l05_bwd_vs_cudnn"] >= TARGETS["l05_bwd_vs_cudnn"] for r in at),
    }


def bench_lesson08(quick: bool = False) -> dict | None:
    if not (DEVICE.on_gpu and DEVICE.supports_tma()):
        print(f"Lesson 08's benchmark needs sm_90 or newer (TMA, Hopper's FP8 tensor cores); this is {DEVICE.cc}.")
        return None
    from ...notebook_cells import load_solution
    sol = load_solution(LESSON, ("matmul", "fp8_matmul", "tma_attention"))
    l05 = load_solution("05_flash_attention_backward", ("flash_attention", "flash_attention_backward"))
    rounds = 3 if quick else 5
    res = {"device": DEVICE.name, "quick": quick, "rounds": rounds}
    res["matmuls"] = bench_matmuls(sol["matmul"], sol["fp8_matmul"], rounds, quick)
    res["attention"] = bench_attention(sol["tma_attention"], l05["flash_attention"], l05["flash_attention_backward"],
                                       rounds, quick)
    res["targets_met"] = targets(res)
    return res


def _host(row: dict, key: str, a: str, b: str) -> str:
    """'a / b' host microseconds per call, or '-' in a report measured before they were."""
    h = row.get(key)
    return f"{h[a]:.1f} / {h[b]:.1f}" if h else "-"


def write_lesson08(res: dict | None, out: pathlib.Path) -> None:
    if res is None:
        return
    from ...report import TIMING, _header, md_table
    lines = ["# Lesson 08 benchmark: TMA, warp specialisation and FP8 on Hopper", ""] + _header()
    lines += ["", TIMING + " do_bench columns: `triton.testing.do_bench` medians, launch cost included.", ""]
    lines += ["## Targets", ""]
    lines += md_table(["target", "threshold", "met"], [[k, f">= {TARGETS[k]:g}x on every shape", "yes" if v else "**no**"]
                                                     for k, v in res["targets_met"].items()])
    lines += ["", "## fp16 matmul: persistent, TMA descriptors, split epilogue (misaligned shapes padded first)", ""]
    lines += md_table(["M x N x K", "yours ms", "cuBLAS ms", "x cuBLAS", "yours TFLOP/s", "cuBLAS TFLOP/s",
                       "do_bench yours / cuBLAS ms", "host us yours / cuBLAS", "rel. error"], [
        ["x".join(map(str, r["shape"])), f"{r['ms']['yours']:.3f}", f"{r['ms']['cuBLAS']:.3f}", f"{r['vs_cublas']:.2f}",
         f"{r['tflops']['yours']:.0f}", f"{r['tflops']['cuBLAS']:.0f}",
         f"{r['do_bench_ms']['yours']:.3f} / {r['do_bench_ms']['cuBLAS']:.3f}", _host(r, "host_us", "yours", "cuBLAS"),
         f"{r['rel_error']:.1e}"]
        for r in res["matmuls"]["matmul"]])
    lines += ["", "## FP8 (e4m3) matmul, per-tensor scales, bf16 out, against torch._scaled_mm", ""]
    lines += md_table(["M x N x K", "yours ms", "_scaled_mm ms", "x _scaled_mm", "yours TFLOP/s", "do_bench yours / base ms",
                       "rel. error (yours / _scaled_mm)"], [
        ["x".join(map(str, r["shape"])), f"{r['ms']['yours']:.3f}", f"{r['ms']['_scaled_mm']:.3f}",
         f"{r['vs_scaled_mm']:.2f}", f"{r['tflops']['yours']:.0f}",
         f"{r['do_bench_ms']['yours']:.3f} / {r['do_bench_ms']['_scaled_mm']:.3f}",
         f"{r['rel_error']:.1e} / {r['scaled_mm_rel_error']:.1e}"] for r in res["matmuls"]["fp8"]])
    lines += ["", f"## Attention, B={ATTN_B}, H={ATTN_H}, fp16: forward TFLOP/s (x cuDNN), backward of lesson 05", ""]
    rows = []
    for r in res["attention"]:
        t = r["fwd_tflops"]
        rows.append([r["D"], r["N"], "yes" if r["causal"] else "no", f"{t['yours (TMA)']:.0f} ({r['tma_vs_cudnn']:.2f}x)",
                     f"{t['lesson 04']:.0f} ({r['l04_vs_cudnn']:.2f}x)", f"{t['cuDNN']:.0f}",
                     f"{r['fwd_do_bench_ms']['yours (TMA)']:.3f} / {r['fwd_do_bench_ms']['cuDNN']:.3f}",
                     _host(r, "fwd_host_us", "yours (TMA)", "cuDNN"),
                     f"{r['bwd_tflops']['lesson 05']:.0f} ({r['l05_bwd_vs_cudnn']:.2f}x)", f"{r['bwd_tflops']['cuDNN']:.0f}",
                     f"{r['rel_error']:.1e}"])
    lines += md_table(["D", "N", "causal", "TMA (yours)", "lesson 04", "cuDNN", "do_bench TMA / cuDNN ms",
                       "host us TMA / cuDNN",
                       "lesson 05 bwd", "cuDNN bwd", "rel. error"], rows)
    (out / "lesson08.md").write_text("\n".join(lines) + "\n")
    (out / "lesson08.json").write_text(json.dumps(res, indent=1, default=str))
