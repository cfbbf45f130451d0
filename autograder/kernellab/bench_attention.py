"""Lessons 04 and 05 on the GPU: the solution FlashAttention forward and backward against SDPA's flash and
cuDNN backends (and naive attention's memory), B=4, H=32, fp16. Called by ``kernellab bench``."""
from __future__ import annotations

import json
import pathlib

import torch

from .device import DEVICE

SHAPES = [(D, N, causal) for D in (64, 128) for N in (1024, 4096, 16384) for causal in (False, True)]
B, H = 4, 32
TARGETS = {"fwd_vs_flash": 1.2, "fwd_vs_cudnn": 0.85, "bwd_vs_flash": 1.0}  # issue 5


def _backend(name):
    from torch.nn.attention import SDPBackend
    return {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[name]


def sdpa_on(name):
    """SDPA forced onto one backend (an error, not a silent fallback, if it cannot run here)."""
    from torch.nn.attention import sdpa_kernel

    from .lessons.attention import attention_sdpa

    def run(q, k, v, causal):
        with sdpa_kernel(_backend(name)):
            return attention_sdpa(q, k, v, causal)
    return run


def _sdpa_backward(name, inputs):
    from torch.nn.attention import sdpa_kernel

    from .lessons.lesson05 import sdpa_backward_of
    with sdpa_kernel(_backend(name)):
        bwd = sdpa_backward_of(inputs)

    def run():
        with sdpa_kernel(_backend(name)):
            return bwd()
    return run


def bench_attention(quick: bool = False) -> dict:
    import sys

    from tqdm.auto import tqdm

    from .bench import load_solution
    from .compare import rel_error
    from .lessons.attention import attention_flops, attention_naive, attention_reference, peak_extra_bytes, qkv
    from .lessons.lesson05 import sdpa_backward_of
    from .timing import interleaved
    ns = load_solution("05_flash_attention_backward", ("flash_attention", "flash_attention_backward"))
    fwd, bwd = ns["flash_attention"], ns["flash_attention_backward"]
    rounds = 3 if quick else 5
    out = {"shapes": [], "memory": []}
    for D, N, causal in tqdm(SHAPES if not quick else SHAPES[::4], desc="attention", file=sys.stdout):
        q, k, v, do = qkv(torch.Generator("cuda").manual_seed(N + D), B, H, N, D, n=4, device="cuda")
        o, lse = fwd(q, k, v, causal)
        row = {"D": D, "N": N, "causal": causal}
        ref_o, ref_lse = attention_reference(q[:1, :2], k[:1, :2], v[:1, :2], causal, dtype=torch.float32)
        row["fwd_rel_error"] = rel_error(o[:1, :2], ref_o)
        row["lse_rel_error"] = rel_error(lse[:1, :2], ref_lse)
        fns = {"solution": lambda: fwd(q, k, v, causal), "flash": lambda: sdpa_on("flash")(q, k, v, causal),
               "cudnn": lambda: sdpa_on("cudnn")(q, k, v, causal),
               "SDPA default": lambda: attention_sdpa_default(q, k, v, causal)}
        t = interleaved(fns, rounds)
        fl = attention_flops(B, H, N, D, causal)
        row |= {f"fwd_{n}_tflops": fl / t[n] / 1e9 for n in fns}
        inputs = [q, k, v, o, lse, do, causal]
        bfns = {"solution": lambda: bwd(*inputs), "flash": _sdpa_backward("flash", inputs),
                "cudnn": _sdpa_backward("cudnn", inputs),
                "SDPA default": sdpa_backward_of(inputs, attention_sdpa_default)}
        tb = interleaved(bfns, rounds)
        row |= {f"bwd_{n}_tflops": 2.5 * fl / tb[n] / 1e9 for n in bfns}
        dq, dk, dv = bwd(*inputs)
        qq, kk, vv = (t_[:1, :2].float().requires_grad_() for t_ in (q, k, v))
        r = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
        g = torch.autograd.grad(r, (qq, kk, vv), do[:1, :2].float())
        row["bwd_rel_error"] = max(rel_error(a[:1, :2], b_) for a, b_ in zip((dq, dk, dv), g))
        row["fwd_vs_flash"] = row["fwd_solution_tflops"] / row["fwd_flash_tflops"]
        row["fwd_vs_cudnn"] = row["fwd_solution_tflops"] / row["fwd_cudnn_tflops"]
        row["bwd_vs_flash"] = row["bwd_solution_tflops"] / row["bwd_flash_tflops"]
        row["bwd_vs_cudnn"] = row["bwd_solution_tflops"] / row["bwd_cudnn_tflops"]
        out["shapes"].append(row)
        print({k_: (round(v_, 3) if isinstance(v_, float) else v_) for k_, v_ in row.items()}, flush=True)
        del q, k, v, do, o, lse, inputs, bfns, fns, dq, dk, dv
        torch.cuda.empty_cache()
    for N in (1024, 4096, 16384) if not quick else (1024,):
        q, k, v = qkv(torch.Generator("cuda").manual_seed(N), B, H, N, 64, device="cuda")
        row = {"N": N, "D": 64, "scores_gb": B * H * N * N * 2 / 1e9}
        for name, fn in (("solution", lambda *a: fwd(*a)), ("SDPA default", attention_sdpa_default),
                         ("naive", attention_naive)):
            peak = peak_extra_bytes(fn, q, k, v, False)
            row[f"{name}_mb"] = None if peak is None else peak / 1e6
        out["memory"].append(row)
        print(row, flush=True)
        del q, k, v
    return out


def attention_sdpa_default(q, k, v, causal):
    from .lessons.attention import attention_sdpa
    return attention_sdpa(q, k, v, causal)


def _fmt(x, spec=",.0f"):
    return "OOM" if x is None else format(x, spec)


def write_attention(res: dict, out: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .bench import TIMING, _header, md_table, met
    rows = res["shapes"]
    head = _header() + ["", TIMING, "", f"B={B}, H={H}, fp16. TFLOP/s count 4 B H N^2 D for the forward (half when "
                        "causal) and 2.5 times that for the backward. flash and cudnn are SDPA forced onto that "
                        "backend; 'SDPA default' is the backend PyTorch picks itself.", ""]
    l4 = ["# Lesson 04 benchmark: FlashAttention forward", ""] + head + [
        f"## forward (targets: >= {TARGETS['fwd_vs_flash']} x SDPA flash, >= {TARGETS['fwd_vs_cudnn']} x SDPA cuDNN)",
        ""]
    l4 += md_table(["D", "N", "causal", "solution", "flash", "cudnn", "SDPA default", "x flash", "met", "x cudnn",
                    "met", "rel. error o / lse"], [
        [r["D"], r["N"], "yes" if r["causal"] else "no", _fmt(r["fwd_solution_tflops"]), _fmt(r["fwd_flash_tflops"]),
         _fmt(r["fwd_cudnn_tflops"]), _fmt(r["fwd_SDPA default_tflops"]), f"{r['fwd_vs_flash']:.2f}",
         met(r["fwd_vs_flash"], TARGETS["fwd_vs_flash"]), f"{r['fwd_vs_cudnn']:.2f}",
         met(r["fwd_vs_cudnn"], TARGETS["fwd_vs_cudnn"]), f"{r['fwd_rel_error']:.1e} / {r['lse_rel_error']:.1e}"]
        for r in rows])
    l4 += ["", "## peak extra memory of one forward call, D=64, not causal (allocator peak minus what was "
           "allocated before; OOM: ran out of the GPU's memory)", ""]
    l4 += md_table(["N", "scores alone (GB)", "solution MB", "SDPA default MB", "naive MB"], [
        [m["N"], f"{m['scores_gb']:.1f}", _fmt(m["solution_mb"], ",.1f"), _fmt(m["SDPA default_mb"], ",.1f"),
         _fmt(m["naive_mb"], ",.1f")] for m in res["memory"]])
    (out / "lesson04.md").write_text("\n".join(l4) + "\n")
    l5 = ["# Lesson 05 benchmark: FlashAttention backward", ""] + head + [
        f"## backward (target: >= {TARGETS['bwd_vs_flash']} x SDPA flash's backward)", ""]
    l5 += md_table(["D", "N", "causal", "solution", "flash", "cudnn", "SDPA default", "x flash", "met", "x cudnn",
                    "rel. error (worst of dQ, dK, dV)"], [
        [r["D"], r["N"], "yes" if r["causal"] else "no", _fmt(r["bwd_solution_tflops"]), _fmt(r["bwd_flash_tflops"]),
         _fmt(r["bwd_cudnn_tflops"]), _fmt(r["bwd_SDPA default_tflops"]), f"{r['bwd_vs_flash']:.2f}",
         met(r["bwd_vs_flash"], TARGETS["bwd_vs_flash"]), f"{r['bwd_vs_cudnn']:.2f}", f"{r['bwd_rel_error']:.1e}"]
        for r in rows])
    (out / "lesson05.md").write_text("\n".join(l5) + "\n")
    (out / "lesson04.json").write_text(json.dumps(res, indent=1))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    for ax, which in zip(axes, ("fwd", "bwd")):
        labels = [f"D{r['D']} N{r['N'] // 1024}k{' c' if r['causal'] else ''}" for r in rows]
        names = ("solution", "flash", "cudnn")
        for i, n in enumerate(names):
            ax.bar([x + 0.27 * (i - 1) for x in range(len(rows))], [r[f"{which}_{n}_tflops"] for r in rows], 0.27,
                   label=n)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(labels, rotation=60, fontsize=7)
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"attention {'forward' if which == 'fwd' else 'backward'}, B={B} H={H} fp16, {DEVICE.name}",
                     fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(out / "lesson04_tflops.png", dpi=110)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    mem = res["memory"]
    for n, style in (("solution", "o-"), ("SDPA default", "s--"), ("naive", "^-")):
        ax.plot([m["N"] for m in mem], [m[f"{n}_mb"] if m[f"{n}_mb"] is not None else float("nan") for m in mem],
                style, label=n)
    for m in mem:
        if m["naive_mb"] is None:
            ax.annotate("naive: out of memory", (m["N"], mem[0]["solution_mb"] or 1), fontsize=8, ha="right")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N")
    ax.set_ylabel("peak extra memory (MB)")
    ax.set_title(f"one attention forward, B={B} H={H} D=64, {DEVICE.name}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "lesson04_memory.png", dpi=110)
