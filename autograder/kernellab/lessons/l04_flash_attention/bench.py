"""Lessons 04 and 05 on the GPU: the solution FlashAttention forward and backward against SDPA's flash and
cuDNN backends (and naive attention's memory), B=4, H=32, fp16. Called by ``kernellab bench``."""
from __future__ import annotations

import json
import pathlib

import torch

from ...device import DEVICE

SHAPES = [(D, N, causal) for D in (64, 128) for N in (1024, 4096, 16384) for causal in (False, True)]
B, H = 4, 32
MEMORY_NS = (1024, 4096, 16384)
TARGETS = {"fwd_vs_flash": 1.2, "fwd_vs_cudnn": 0.85, "bwd_vs_flash": 1.0}  # issue 5


def _backends():
    """name -> SDPA restricted to that backend (an error, not a silent fallback, if it cannot run here)."""
    from torch.nn.attention import SDPBackend

    from ..attention import attention_sdpa, sdpa_on
    return {"flash": sdpa_on(SDPBackend.FLASH_ATTENTION), "cudnn": sdpa_on(SDPBackend.CUDNN_ATTENTION),
            "SDPA default": attention_sdpa}


def _time_shape(fwd, bwd, D: int, N: int, causal: bool, rounds: int) -> dict:
    """One shape: TFLOP/s of the solution and of each SDPA backend, forward and backward, and the solution's
    errors on a slice of the batch (the tensors and SDPA's graphs go when this returns)."""
    from ...compare import rel_error
    from ...timing import interleaved
    from ..attention import attention_flops, attention_grads_reference, attention_reference, qkv
    from ..l05_flash_attention_backward.problems import sdpa_backward_of
    q, k, v, do = qkv(torch.Generator(DEVICE.torch_device).manual_seed(N + D), B, H, N, D, n=4,
                      device=DEVICE.torch_device)
    o, lse = fwd(q, k, v, causal)
    row = {"D": D, "N": N, "causal": causal}
    ref_o, ref_lse = attention_reference(q[:1, :2], k[:1, :2], v[:1, :2], causal, dtype=torch.float32)
    row["fwd_rel_error"] = rel_error(o[:1, :2], ref_o)
    row["lse_rel_error"] = rel_error(lse[:1, :2], ref_lse)
    sdpa = _backends()
    fns = {"solution": lambda: fwd(q, k, v, causal)} | {n: (lambda f=f: f(q, k, v, causal)) for n, f in sdpa.items()}
    t = interleaved(fns, rounds)
    _paid(row, "fwd", {n: fns[n] for n in ("solution", "cudnn")})
    fl = attention_flops(B, H, N, D, causal)
    row |= {f"fwd_{n}_tflops": fl / t[n] / 1e9 for n in ("solution", *sdpa)}
    inputs = [q, k, v, o, lse, do, causal]
    fns = {"solution": lambda: bwd(*inputs)} | {n: sdpa_backward_of(inputs, f) for n, f in sdpa.items()}
    t = interleaved(fns, rounds)
    _paid(row, "bwd", {n: fns[n] for n in ("solution", "cudnn")})
    row |= {f"bwd_{n}_tflops": 2.5 * fl / t[n] / 1e9 for n in ("solution", *sdpa)}
    g = attention_grads_reference(q[:1, :2], k[:1, :2], v[:1, :2], do[:1, :2], causal, dtype=torch.float32)
    row["bwd_rel_error"] = max(rel_error(a[:1, :2], b) for a, b in zip(bwd(*inputs), g))
    for which in ("fwd", "bwd"):
        for base in ("flash", "cudnn"):
            row[f"{which}_vs_{base}"] = row[f"{which}_solution_tflops"] / row[f"{which}_{base}_tflops"]
    return row


def _paid(row: dict, which: str, fns: dict) -> None:
    """``{which}_{name}_do_bench_ms`` and ``{which}_{name}_host_us`` of each callable (timing.launch_paid)."""
    from ...timing import launch_paid
    if not DEVICE.on_gpu:  # do_bench needs a GPU (the CPU test of this benchmark's plumbing has none)
        return
    for n, v in launch_paid(fns, n_host=20).items():
        row[f"{which}_{n}_do_bench_ms"], row[f"{which}_{n}_host_us"] = v["do_bench_ms"], v["host_us"]


def bench_attention(quick: bool = False) -> dict:
    import sys

    from tqdm.auto import tqdm

    from ...notebook_cells import load_solution
    from ..attention import attention_naive, attention_sdpa, peak_extra_bytes, qkv
    ns = load_solution("05_flash_attention_backward", ("flash_attention", "flash_attention_backward"))
    fwd, bwd = ns["flash_attention"], ns["flash_attention_backward"]
    rounds = 3 if quick else 5
    out = {"shapes": [], "memory": []}
    for D, N, causal in tqdm(SHAPES if not quick else SHAPES[::4], desc="attention", file=sys.stdout):
        out["shapes"].append(_time_shape(fwd, bwd, D, N, causal, rounds))
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in out["shapes"][-1].items()}, flush=True)
        if DEVICE.on_gpu:
            torch.cuda.empty_cache()
    for N in MEMORY_NS if not quick else MEMORY_NS[:1]:
        q, k, v = qkv(torch.Generator(DEVICE.torch_device).manual_seed(N), B, H, N, 64, device=DEVICE.torch_device)
        row = {"N": N, "D": 64, "scores_gb": B * H * N * N * 2 / 1e9}
        for name, fn in (("solution", fwd), ("SDPA default", attention_sdpa), ("naive", attention_naive)):
            peak = peak_extra_bytes(fn, q, k, v, False)
            row[f"{name}_mb"] = None if peak is None else peak / 1e6
        out["memory"].append(row)
        print(row, flush=True)
    return out


def _fmt(x, spec=",.0f"):
    return "OOM" if x is None else format(x, spec)


def write_attention(res: dict, out: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ...report import TIMING, _header, md_table, met, paid_table
    rows = res["shapes"]
    shape_of = lambda r: f"{r['D']}, {r['N']}, {'causal' if r['causal'] else 'full'}"  # noqa: E731
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
    l4 += paid_table("forward", [{k[4:]: v for k, v in r.items() if k.startswith("fwd_")} | r for r in rows],
                     "D, N, mask", shape_of, ["solution", "cudnn"])
    (out / "lesson04.md").write_text("\n".join(l4) + "\n")
    l5 = ["# Lesson 05 benchmark: FlashAttention backward", ""] + head + [
        f"## backward (target: >= {TARGETS['bwd_vs_flash']} x SDPA flash's backward)", ""]
    l5 += md_table(["D", "N", "causal", "solution", "flash", "cudnn", "SDPA default", "x flash", "met", "x cudnn",
                    "rel. error (worst of dQ, dK, dV)"], [
        [r["D"], r["N"], "yes" if r["causal"] else "no", _fmt(r["bwd_solution_tflops"]), _fmt(r["bwd_flash_tflops"]),
         _fmt(r["bwd_cudnn_tflops"]), _fmt(r["bwd_SDPA default_tflops"]), f"{r['bwd_vs_flash']:.2f}",
         met(r["bwd_vs_flash"], TARGETS["bwd_vs_flash"]), f"{r['bwd_vs_cudnn']:.2f}", f"{r['bwd_rel_error']:.1e}"]
        for r in rows])
    l5 += paid_table("backward", [{k[4:]: v for k, v in r.items() if k.startswith("bwd_")} | r for r in rows],
                     "D, N, mask", shape_of, ["solution", "cudnn"])
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
