"""Lesson 08's TMA attention forward against variants of it (`scripts/tma_attention/variants_cell.py`: the next
block's Q K^T issued before this block's softmax, two half-height Q tiles alternated, and launch configurations),
on lesson 04's grid (B=4, H=32, N in {1k, 4k, 16k}, D in {64, 128}, causal and not), with SDPA's cuDNN backend
timed beside them on the same tensors. Every candidate's output is compared with the solution's first.

    python3 scripts/tma_attention_ab.py [--set halves|wide] [--rounds 3] [--out DIR] [--quick]   # on sm_90 (assets/bench/lesson08_attention_variants_h100.md)
    python3 scripts/tma_attention_ab.py --cpu-check             # each variant in the interpreter vs float64
"""
import argparse
import contextlib
import datetime
import io
import json
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "autograder"))
LESSON = "08_hopper"
CONFIGS = [(128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3),
           (64, 128, 4, 2)]
HALVES = [(128, 64, 4, 2), (128, 64, 4, 3), (128, 128, 4, 2), (256, 64, 8, 2), (256, 64, 8, 3), (256, 128, 8, 2)]
# (kind, BLOCK_M, BLOCK_N, warps, stages, warp_specialize): "wide" was the first run, "halves" the second (both
# before the solution took the halves), "adopted" the solution against what it replaced
SETS = {
    "wide": ([("one_tile", *c, True) for c in CONFIGS] + [("pipe", *c, True) for c in CONFIGS]
             + [("pipe", *c, False) for c in CONFIGS] + [("halves", *c, True) for c in HALVES]),
    "halves": ([("one_tile", 128, 64, 8, 3, True), ("one_tile", 128, 128, 8, 3, True)]
               + [("halves", *c, True) for c in [(256, 64, 8, 3), (256, 64, 8, 4), (256, 32, 8, 4), (256, 32, 8, 6),
                                                  (128, 64, 8, 3), (128, 64, 8, 4), (256, 128, 8, 3)]]
               + [("halves", 256, 64, 8, 3, False), ("halves", 128, 64, 4, 3, False), ("halves", 128, 64, 4, 4, False)]
               + [("plain_halves", *c, False) for c in [(256, 64, 8, 3), (256, 64, 8, 4), (128, 64, 8, 3)]]),
    "adopted": ([("one_tile", 128, 64, 8, 3, True), ("one_tile", 128, 128, 8, 3, True)]
                + [("halves", 256, 64, 8, 3, True), ("halves", 128, 64, 4, 3, False)]),
    # halves small enough in shared memory for two programs per SM (at most ~113 KB each at D = 128), so one
    # program's prologue and epilogue overlap the other's loop: for short sequences
    "occupancy": [("halves", *c, False) for c in [(128, 64, 4, 2), (128, 32, 4, 3), (128, 32, 4, 4), (64, 64, 4, 2),
                                                   (64, 32, 4, 3)]] + [("halves", 256, 32, 8, 3, True)],
}


def name_of(c) -> str:
    kind, bm, bn, w, s, ws = c
    return f"{kind} {bm}x{bn} w{w} s{s}" + ("" if ws else " noWS")


def load():
    from kernellab.notebook_cells import grade_id, load_solution, read_notebook
    from kernellab.paths import repo_root
    nb = read_notebook(repo_root() / "solutions" / LESSON / f"{LESSON}.ipynb")
    cell = next(c.source for c in nb.cells if grade_id(c) == "attention_code")
    cell += "\n\n\n" + (HERE / "tma_attention" / "variants_cell.py").read_text()
    with contextlib.redirect_stdout(io.StringIO()):
        return (load_solution(LESSON, ("tma_attention", "attention_variant"), overrides={"attention_code": cell},
                              tag="variants"),
                load_solution("04_flash_attention", ("flash_attention",)))


def cpu_check():
    """Each variant against the float64 reference on three small shapes (a key tail, a causal diagonal that ends
    mid-tile, two heads); the solution itself is checked by lesson 08's tests."""
    import torch

    from kernellab.compare import rel_error
    from kernellab.lessons.attention import LSE_FLOOR, attention_reference, qkv
    ns, _ = load()
    gen = torch.Generator().manual_seed(8)
    cases = [(1, 1, 50, 32, False), (1, 2, 37, 16, True), (2, 1, 64, 16, True)]
    for c in [("one_tile", 16, 16, 4, 2, True), ("pipe", 16, 16, 4, 2, False), ("plain_halves", 32, 16, 4, 2, False)]:
        for B, H, N, D, causal in cases:
            q, k, v = qkv(gen, B, H, N, D)
            o, lse = ns["attention_variant"](*c)(q, k, v, causal)
            ref_o, ref_lse = attention_reference(q, k, v, causal)
            err = max(rel_error(o, ref_o), rel_error(lse, ref_lse, floor=LSE_FLOOR["lse"]))
            print(f"{name_of(c)} B={B} H={H} N={N} D={D} causal={causal}: relative error {err:.1e}")
            if not err < 1e-2:
                print("FAILED")
                return 1
    print("CPU CHECK PASSED")
    return 0


def gpu_ab(out, quick, which, rounds):
    import torch
    import triton

    from kernellab.lessons.attention import attention_flops, qkv
    from kernellab.lessons.l08_hopper.bench import ATTN_B, ATTN_H, ATTN_SHAPES
    from kernellab.lessons.l08_hopper.problems import attention_cudnn
    from kernellab.compare import rel_error_on_device
    from kernellab.sweeps import ab_row
    ns, l04 = load()
    shapes = ATTN_SHAPES[::4] if quick else ATTN_SHAPES
    rows, t0 = [], time.time()
    for D, N, causal in shapes:
        q, k, v = qkv(torch.Generator("cuda").manual_seed(N + D), ATTN_B, ATTN_H, N, D, device="cuda")
        ref_o, ref_lse = ns["tma_attention"](q, k, v, causal)
        fixed = {"cuDNN": lambda: attention_cudnn(q, k, v, causal),
                 "lesson 04": lambda: l04["flash_attention"](q, k, v, causal),
                 "solution": lambda: ns["tma_attention"](q, k, v, causal)}
        variants = {name_of(c): (lambda fn=ns["attention_variant"](*c): fn(q, k, v, causal)) for c in SETS[which]}
        fl = attention_flops(ATTN_B, ATTN_H, N, D, causal)
        row = ab_row(fixed, variants,
                     lambda out: max(rel_error_on_device(out[0], ref_o), (out[1] - ref_lse).abs().max().item()),
                     "the solution's", fl, rounds)
        rows.append({"D": D, "N": N, "causal": causal} | row)
        vs, fails = row["vs_cudnn"], row["failed"]
        best = max(vs, key=vs.get)
        print(f"D={D} N={N} causal={causal}: cuDNN {row['tflops']['cuDNN']:.0f} TFLOP/s; solution "
              f"{vs['solution']:.3f}x; best {best} {vs[best]:.3f}x; failed {len(fails)}  [{time.time() - t0:.0f} s]",
              flush=True)
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                   "B": ATTN_B, "H": ATTN_H, "set": which, "candidates": [name_of(c) for c in SETS[which]],
                   "timer": f"triton.testing.do_bench median (warmup 10, rep 60 ms), median of {rounds} rounds",
                   "rows": rows}, open(os.path.join(out, f"tma_attention_ab_{which}.json"), "w"), indent=1)  # every shape
        del q, k, v, ref_o, ref_lse, fixed
        torch.cuda.empty_cache()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--set", default="halves", choices=sorted(SETS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpu-check", action="store_true")
    a = ap.parse_args()
    import kernellab as kl
    kl.setup()
    sys.exit(cpu_check() if a.cpu_check else gpu_ab(a.out, a.quick, a.set, a.rounds))
