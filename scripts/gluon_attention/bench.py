"""The Gluon attention forward (`fa3_gluon.py`) against SDPA's cuDNN backend and lesson 08's solution,
on lesson 04's grid (B=4, H=32, N in {1k, 4k, 16k}, D in {64, 128}, causal and not). GPU only (sm_90).

    python3 scripts/gluon_attention/bench.py --check          # each variant against float64 on small shapes
    python3 scripts/gluon_attention/bench.py --out DIR         # the grid, do_bench medians of interleaved rounds
    python3 scripts/gluon_attention/bench.py --report DIR      # a markdown table of DIR's JSON files
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
sys.path.insert(0, str(HERE.parent.parent / "autograder"))
sys.path.insert(0, str(HERE))
# (BLOCK_N, STAGES, PIPE, PERSISTENT[, STAGGER[, PINGPONG]]) per head dimension
VARIANTS = {64: [(128, 2, False, False), (128, 3, True, True), (128, 3, True, True, False, True),
                 (128, 3, True, False, False, True)],
            128: [(128, 2, False, False), (128, 2, False, True), (128, 2, True, True, False, True),
                  (128, 2, True, False, False, True), (64, 3, True, True, False, True)]}


def _fields(v) -> tuple:
    return (*v, False, False)[:6]


def name_of(D, v) -> str:
    bn, st, pipe, persistent, stagger, pingpong = _fields(v)
    return (f"gluon 128x{bn} s{st}" + (" pipe" if pipe else "") + (" persistent" if persistent else "")
            + (" stagger" if stagger else "") + (" pingpong" if pingpong else ""))


def run(q, k, v, causal, var, programs=None):
    import fa3_gluon as F
    bn, st, pipe, persistent, stagger, pingpong = _fields(var)
    return F.attention(q, k, v, causal, block_n=bn, stages=st, pipe=pipe, persistent=persistent, programs=programs,
                       stagger=stagger, pingpong=pingpong)


def check() -> int:
    import torch

    from kernellab.compare import rel_error
    from kernellab.lessons.attention import LSE_FLOOR, attention_reference, qkv
    gen = torch.Generator("cuda").manual_seed(20)
    bad = 0
    for D, vs in VARIANTS.items():
        for v in vs:
            # (B, H, N, causal, programs): a persistent kernel's programs walk 30 tiles as 7 programs, then 256
            for B, H, N, causal, programs in [(1, 2, 256, False, None), (1, 2, 256, True, None),
                                              (2, 3, 640, True, 7), (2, 3, 640, False, 7), (2, 1, 384, False, None),
                                              (4, 8, 1024, True, None)]:
                print(f"{name_of(D, v)} D={D} B={B} H={H} N={N} causal={causal} programs={programs}: ", end="",
                      flush=True)
                q, k, v_ = qkv(gen, B, H, N, D, device="cuda")
                o, lse = run(q, k, v_, causal, v, programs)
                torch.cuda.synchronize()
                ref_o, ref_lse = attention_reference(q, k, v_, causal)
                err = max(rel_error(o.cpu(), ref_o.cpu()), rel_error(lse.cpu(), ref_lse.cpu(), floor=LSE_FLOOR["lse"]))
                print(f"relative error {err:.1e}" + ("" if err < 1e-2 else "  FAILED"), flush=True)
                bad += not err < 1e-2
    print("CHECK " + ("FAILED" if bad else "PASSED"))
    return 1 if bad else 0


def bench_all(out, rounds, quick) -> int:
    """Each shape in its own process under a time limit, so a kernel that hangs costs one shape, not the run."""
    import subprocess
    from kernellab.lessons.l08_hopper.bench import ATTN_SHAPES
    idx = range(0, len(ATTN_SHAPES), 4) if quick else range(len(ATTN_SHAPES))
    for i in idx:
        try:
            subprocess.run([sys.executable, __file__, "--out", out, "--rounds", str(rounds), "--shape", str(i)],
                           timeout=150)
        except subprocess.TimeoutExpired:
            print(f"shape {ATTN_SHAPES[i]}: TIMED OUT after 150 s", flush=True)
    return 0


def bench(out, rounds, shape) -> int:
    """One shape of the grid (``shape``: its index in lesson 08's ATTN_SHAPES), written to gluon_attention_NN.json."""
    import torch
    import triton
    from triton.testing import do_bench

    from kernellab.compare import rel_error_on_device
    from kernellab.lessons.attention import attention_flops, qkv
    from kernellab.lessons.l08_hopper.bench import ATTN_B, ATTN_H, ATTN_SHAPES
    from kernellab.lessons.l08_hopper.problems import attention_cudnn
    from kernellab.notebook_cells import load_solution
    from kernellab.sweeps import checked_candidates
    from kernellab.timing import interleaved
    with contextlib.redirect_stdout(io.StringIO()):
        l08 = load_solution("08_hopper", ("tma_attention",))
    D, N, causal = ATTN_SHAPES[shape]
    q, k, v = qkv(torch.Generator("cuda").manual_seed(N + D), ATTN_B, ATTN_H, N, D, device="cuda")
    ref_o = attention_cudnn(q, k, v, causal)
    fns = {"cuDNN": lambda: attention_cudnn(q, k, v, causal),
           "lesson 08": lambda: l08["tma_attention"](q, k, v, causal)}
    gluon, errs, fails = checked_candidates({name_of(D, var): (lambda var=var: run(q, k, v, causal, var))
                                             for var in VARIANTS[D]},
                                            lambda out: rel_error_on_device(out[0], ref_o), "cuDNN's")
    fns |= gluon
    timed = interleaved(fns, rounds, timer=lambda f: do_bench(f, warmup=10, rep=60, return_mode="median"))
    ms = {n: timed[n] for n in fns}
    fl = attention_flops(ATTN_B, ATTN_H, N, D, causal)
    vs = {n: ms["cuDNN"] / t for n, t in ms.items() if n != "cuDNN"}
    row = {"D": D, "N": N, "causal": causal, "do_bench_ms": ms, "vs_cudnn": vs,
           "tflops": {n: fl / t / 1e9 for n, t in ms.items()}, "errors_vs_cudnn": errs, "failed": fails}
    print(f"D={D} N={N} causal={causal}: cuDNN {fl / ms['cuDNN'] / 1e9:.0f} TFLOP/s; "
          + "; ".join(f"{n} {x:.3f}x" for n, x in vs.items()) + f"; best {max(vs, key=vs.get)}; failed {fails}",
          flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "B": ATTN_B, "H": ATTN_H,
               "timer": f"triton.testing.do_bench median (warmup 10, rep 60 ms), median of {rounds} rounds",
               "rows": [row]}, open(os.path.join(out, f"gluon_attention_{shape:02d}.json"), "w"), indent=1)
    return 0


def report(folder) -> int:
    """Each shape's row: cuDNN's TFLOP/s, then every candidate's time as a multiple of cuDNN's speed (above 1:
    faster), the best Gluon candidate in bold."""
    from kernellab.report import md_table
    rows = [r for f in sorted(pathlib.Path(folder).glob("gluon_attention*.json")) for r in json.load(open(f))["rows"]]
    meta = json.load(open(sorted(pathlib.Path(folder).glob("gluon_attention*.json"))[0]))
    names = list(dict.fromkeys(n for r in rows for n in r["vs_cudnn"]))
    print(f"{meta['device']}, {meta['date']}, torch {meta['torch']}, triton {meta['triton']}; {meta['timer']}\n")
    table = []
    for r in rows:
        vs = r["vs_cudnn"]
        gl = {n: x for n, x in vs.items() if n.startswith("gluon")}
        best = max(gl, key=gl.get)
        table.append([r["D"], r["N"], "yes" if r["causal"] else "no", f"{r['tflops']['cuDNN']:.0f}"]
                     + [(f"**{vs[n]:.3f}**" if n == best else f"{vs[n]:.3f}") if n in vs else "-" for n in names]
                     + [f"{gl[best]:.3f}"])
    print("\n".join(md_table(["D", "N", "causal", "cuDNN TFLOP/s", *names, "best Gluon"], table)))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--shape", type=int, default=None)
    ap.add_argument("--report", default=None)
    a = ap.parse_args()
    if a.report:
        sys.exit(report(a.report))
    import kernellab as kl
    kl.setup()
    sys.exit(check() if a.check else bench_all(a.out, a.rounds, a.quick) if a.shape is None
             else bench(a.out, a.rounds, a.shape))
