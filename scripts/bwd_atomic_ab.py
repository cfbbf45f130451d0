"""Lesson 05's backward as committed (two kernels, seven products per tile) against one kernel that adds dQ into a
float32 buffer with atomics (five products): `scripts/bwd_atomic/atomic_cell.py` (tl.atomic_add, relaxed) or, by
`tma_atomic`'s edit of it, Hopper's TMA reduction (a tensor descriptor's atomic_add; GPU only: the interpreter has no
descriptor reductions). Either replaces the solution's `flash_backward_code` cell; SDPA's cuDNN and flash backwards are timed beside them on the same tensors.

    python3 scripts/bwd_atomic_ab.py [atomic|tma_atomic] [--out DIR]   # on a GPU (assets/bench/lesson05_bwd_atomic_h100.md)
    python3 scripts/bwd_atomic_ab.py --cpu-check                       # the atomic cell in the interpreter
"""
import argparse
import contextlib
import datetime
import io
import json
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "autograder"))
SHAPES = [(2, 8, 1000, 64, True), (2, 8, 1000, 128, False), (4, 16, 2048, 64, True), (4, 32, 1024, 64, False),
          (4, 32, 1024, 64, True), (4, 32, 4096, 64, False), (4, 32, 4096, 64, True), (4, 32, 1024, 128, True),
          (4, 32, 4096, 128, False), (4, 32, 4096, 128, True)]
NAMES = ("flash_attention", "flash_attention_backward")


def tma_atomic(cell: str) -> str:
    """The atomic cell with each dQ tile added by one TMA reduction over a (B*H, N, D) descriptor (rows >= N are
    clipped by the descriptor, so the masked and unmasked walks add the same way)."""
    edits = [("def fused_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, dq_ptrs, lse_ptr",
              "def fused_blocks(dk, dv, k, v, qT_ptrs, do_ptrs, dq_desc, bh, lse_ptr"),
             ("""        if MASKED:
            tl.atomic_add(dq_ptrs + start * HEAD_DIM, dq, mask=row_ok[:, None], sem="relaxed")
        else:
            tl.atomic_add(dq_ptrs + start * HEAD_DIM, dq, sem="relaxed")
""", "        dq_desc.atomic_add([bh, start, 0], dq.reshape(1, BLOCK_M, HEAD_DIM))\n"),
             ("    dq_ptrs = dq32_ptr + bh.to(tl.int64) * N_CTX * HEAD_DIM + m[:, None] * HEAD_DIM + d[None, :]\n",
              "    dq_desc = tl.make_tensor_descriptor(dq32_ptr, shape=[tl.num_programs(1), N_CTX, HEAD_DIM],\n"
              "                                        strides=[N_CTX * HEAD_DIM, HEAD_DIM, 1],\n"
              "                                        block_shape=[1, BLOCK_M, HEAD_DIM])\n"),
             ("do_ptrs, dq_ptrs, lse_ptr + stats", "do_ptrs, dq_desc, bh, lse_ptr + stats")]
    for old, new in edits:
        assert old in cell, f"the atomic cell changed: {old[:60]!r}"
        cell = cell.replace(old, new)
    return cell


def load(variant):
    from kernellab.notebook_cells import load_solution
    cell = (HERE / "bwd_atomic" / "atomic_cell.py").read_text()
    cell = tma_atomic(cell) if variant == "tma_atomic" else cell
    with contextlib.redirect_stdout(io.StringIO()):
        old = load_solution("05_flash_attention_backward", NAMES)
        new = load_solution("05_flash_attention_backward", NAMES, overrides={"flash_backward_code": cell}, tag=variant)
    return old, new


def cpu_check():
    from kernellab.lessons.l05_flash_attention_backward import problems as P
    tma_atomic((HERE / "bwd_atomic" / "atomic_cell.py").read_text())  # its edits still apply
    _, new = load("atomic")
    P.check_flash_attention_backward(new["flash_attention_backward"])  # raises CheckFailed if wrong
    print("CPU CHECK PASSED")


def gpu_ab(variant, out):
    import torch
    import triton
    from torch.nn.attention import SDPBackend

    from kernellab.lessons.attention import attention_flops, sdpa_on
    from kernellab.timing import do_bench_ms, interleaved
    old, new = load(variant)
    rows = []
    for (B, H, N, D, causal) in SHAPES:
        g = torch.Generator("cuda").manual_seed(N + D)
        q, k, v, do = (torch.randn(B, H, N, D, generator=g, device="cuda", dtype=torch.float16) for _ in range(4))
        o, lse = old["flash_attention"](q, k, v, causal)
        fns = {"old": lambda: old["flash_attention_backward"](q, k, v, o, lse, do, causal),
               "new": lambda: new["flash_attention_backward"](q, k, v, o, lse, do, causal)}
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
            o_b = sdpa_on(backend)(qq, kk, vv, causal)
            fns[name] = lambda o_b=o_b, ins=(qq, kk, vv): torch.autograd.grad(o_b, ins, do, retain_graph=True)
        ref = [t.float() for t in fns["flash"]()]
        errs = {n: max(((a.float() - r).norm() / r.norm()).item() for a, r in zip(fns[n](), ref)) for n in ("old", "new")}
        ms, paid = interleaved(fns, 5), do_bench_ms(fns, warmup=10, rep=50)
        flops = attention_flops(B, H, N, D, causal, backward=True)
        rows.append({"shape": [B, H, N, D, causal], "ms": ms, "do_bench_ms": paid, "errs": errs,
                     "tflops": {n: flops / ms[n] / 1e9 for n in fns}})
        print(f"B={B} H={H} N={N} D={D} causal={causal}: " + "  ".join(f"{n} {ms[n]:.3f} ms" for n in fns)
              + f"  new/old {ms['old'] / ms['new']:.3f}x  errors {errs['old']:.1e} / {errs['new']:.1e}", flush=True)
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "variant": variant, "rows": rows,
                   "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")},
                  open(os.path.join(out, f"bwd_{variant}_ab.json"), "w"), indent=1)  # after every shape


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("variant", nargs="?", default="atomic", choices=("atomic", "tma_atomic"))
    ap.add_argument("--out", default=".")
    ap.add_argument("--cpu-check", action="store_true")
    a = ap.parse_args()
    import kernellab as kl
    kl.setup()
    cpu_check() if a.cpu_check else gpu_ab(a.variant, a.out)
