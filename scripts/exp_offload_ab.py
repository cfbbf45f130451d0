"""Where do the online softmax's exponentials run? Lessons 04 and 08's attention forward with part or all of them
moved from the special-function unit (MUFU) to the FMA pipe (`scripts/exp_offload/exp2_cell.py` says why and what
each mode is), against the solutions and SDPA's cuDNN backend on lesson 04's grid (B=4, H=32, N in {1k, 4k, 16k},
D in {64, 128}, causal and not). Every variant is the solution's own cell with its one `tl.math.exp2` of the scores
swapped, so nothing else differs; each is compared with the solution's output before it is timed.

    python3 scripts/exp_offload_ab.py [--rounds 3] [--out DIR] [--quick]   # on a GPU (sm_90 for lesson 08)
    python3 scripts/exp_offload_ab.py --cpu-check                        # each mode in the interpreter vs float64
    python3 scripts/exp_offload_ab.py --report JSON                      # a run's JSON as markdown tables
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
SCORE_EXP = "p = tl.math.exp2(s * qk_scale - m_new[:, None])"
LESSONS = {"lesson 04": ("04_flash_attention", "flash_attention"), "lesson 08": ("08_hopper", "tma_attention")}
MODES = (1, 2, 3)


def load(lesson: str, mode: int | None) -> dict:
    """The lesson's solution namespace; with ``mode``, its attention cell with the scores' exponential swapped."""
    from kernellab.notebook_cells import load_solution
    nb_id, fn = LESSONS[lesson]
    if mode is None:
        with contextlib.redirect_stdout(io.StringIO()):
            return load_solution(nb_id, (fn,))
    helpers = (HERE / "exp_offload" / "exp2_cell.py").read_text()

    def edit(src: str) -> str:
        if SCORE_EXP not in src:
            return src
        return (f"EXP_MODE = tl.constexpr({mode})\n\n" + helpers + "\n\n"
                + src.replace(SCORE_EXP, "p = softmax_exp2(s * qk_scale - m_new[:, None], EXP_MODE)"))

    with contextlib.redirect_stdout(io.StringIO()):
        ns = load_solution(nb_id, (fn,), edit=edit, tag=f"exp-mode-{mode}")
    assert "softmax_exp2" in ns, f"{lesson}: the solution no longer has the line {SCORE_EXP!r}"
    return ns


_FMA_CHECK = """
@triton.jit
def exp2_fma_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, exp2_fma(tl.load(x_ptr + i, mask=i < n)), mask=i < n)
"""


def exp2_fma_error() -> float:
    """exp2_fma's worst relative error against 2^x over a dense grid of x in [-30, 0]; -inf must give (almost) 0."""
    import torch
    import triton

    from kernellab.notebook_cells import exec_cells, new_namespace
    ns = new_namespace()
    exec_cells([(HERE / "exp_offload" / "exp2_cell.py").read_text(), _FMA_CHECK], ns, tag="exp2-fma")
    x = torch.cat([torch.linspace(-30, 0, 60001), torch.tensor([-float("inf")])])
    y = torch.empty_like(x)
    ns["exp2_fma_kernel"][(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    assert 0 <= y[-1].item() <= 2.0 ** -125
    ref = torch.exp2(x[:-1].double())
    return ((y[:-1].double() - ref).abs() / ref).max().item()


def cpu_check() -> int:
    """Each mode in the interpreter against the float64 reference: a key tail, a causal diagonal mid-tile, two
    heads. Both lessons pick their CPU launch configurations themselves."""
    import torch

    from kernellab.compare import rel_error
    from kernellab.lessons.attention import LSE_FLOOR, attention_reference, qkv
    gen = torch.Generator().manual_seed(4)
    fma_err = exp2_fma_error()
    print(f"exp2_fma against 2^x in float64 on [-30, 0]: worst relative error {fma_err:.1e}; 2^-inf -> <= 2^-125")
    if not fma_err < 2.2e-4:
        print("FAILED")
        return 1
    cases = [(1, 1, 50, 32, False), (1, 2, 37, 16, True), (2, 1, 64, 16, True)]
    worst = 0.0
    for lesson, (_, fn) in LESSONS.items():
        for mode in MODES:
            attn = load(lesson, mode)[fn]
            for B, H, N, D, causal in cases:
                q, k, v = qkv(gen, B, H, N, D)
                o, lse = attn(q, k, v, causal)
                ref_o, ref_lse = attention_reference(q, k, v, causal)
                err = max(rel_error(o, ref_o), rel_error(lse, ref_lse, floor=LSE_FLOOR["lse"]))
                worst = max(worst, err)
                print(f"{lesson} mode {mode} B={B} H={H} N={N} D={D} causal={causal}: relative error {err:.1e}")
                if not err < 1e-2:
                    print("FAILED")
                    return 1
    print(f"CPU CHECK PASSED (worst relative error {worst:.1e})")
    return 0


def gpu_ab(out: str, quick: bool, rounds: int) -> int:
    import torch
    import triton

    from kernellab.compare import rel_error_on_device
    from kernellab.lessons.attention import attention_flops, qkv
    from kernellab.lessons.l08_hopper.bench import ATTN_B, ATTN_H, ATTN_SHAPES
    from kernellab.lessons.l08_hopper.problems import attention_cudnn
    from kernellab.sweeps import ab_row
    hopper = torch.cuda.get_device_capability() >= (9, 0)
    lessons = [name for name in LESSONS if hopper or name == "lesson 04"]
    spaces = {(name, mode): load(name, mode) for name in lessons for mode in (None, *MODES)}
    label = {key: key[0] if key[1] is None else f"{key[0]} m{key[1]}" for key in spaces}
    attn = {key: ns[LESSONS[key[0]][1]] for key, ns in spaces.items()}
    solutions = {label[key]: f for key, f in attn.items() if key[1] is None}
    variants = {label[key]: f for key, f in attn.items() if key[1] is not None}
    shapes = ATTN_SHAPES[::4] if quick else ATTN_SHAPES
    rows, t0 = [], time.time()
    for D, N, causal in shapes:
        q, k, v = qkv(torch.Generator("cuda").manual_seed(N + D), ATTN_B, ATTN_H, N, D, device="cuda")
        ref_o, ref_lse = solutions["lesson 04"](q, k, v, causal)
        fixed = {"cuDNN": lambda: attention_cudnn(q, k, v, causal)}
        fixed |= {name: (lambda f=f: f(q, k, v, causal)) for name, f in solutions.items()}
        fl = attention_flops(ATTN_B, ATTN_H, N, D, causal)
        row = ab_row(fixed, {name: (lambda f=f: f(q, k, v, causal)) for name, f in variants.items()},
                     lambda o: max(rel_error_on_device(o[0], ref_o), (o[1] - ref_lse).abs().max().item()),
                     "lesson 04's solution", fl, rounds)
        rows.append({"D": D, "N": N, "causal": causal} | row)
        vs, fails = row["vs_cudnn"], row["failed"]
        line = " ".join(f"{n.replace('lesson ', 'L')} {x:.3f}" for n, x in vs.items())
        print(f"D={D} N={N} causal={causal}: cuDNN {row['tflops']['cuDNN']:.0f} TFLOP/s | x cuDNN: {line} | "
              f"failed {len(fails)} [{time.time() - t0:.0f} s]", flush=True)
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                   "B": ATTN_B, "H": ATTN_H, "rounds": rounds,
                   "timer": f"triton.testing.do_bench median (warmup 10, rep 60 ms), median of {rounds} rounds",
                   "rows": rows, "lesson04_configs": {  # what lesson 04's autotuner chose, per (N, D, causal)
                       label[key]: {str(k): str(cfg) for k, cfg in ns["flash_fwd_kernel"].cache.items()}
                       for key, ns in spaces.items() if key[0] == "lesson 04"}},
                  open(os.path.join(out, "exp_offload_ab.json"), "w"), indent=1)
        del q, k, v, ref_o, ref_lse, fixed
        torch.cuda.empty_cache()
    return 0


def report(path: str) -> int:
    from kernellab.report import md_table
    d = json.load(open(path))
    print(f"{d['device']}, {d['date']}, torch {d['torch']}, triton {d['triton']}; {d['timer']}\n")
    rows = d["rows"]
    names = list(rows[0]["vs_cudnn"])
    head = ["candidate"] + [f"D={r['D']} N={r['N'] // 1024}k {'causal' if r['causal'] else 'full'}" for r in rows]
    body = [["cuDNN TFLOP/s"] + [f"{r['tflops']['cuDNN']:.0f}" for r in rows]]
    body += [[n] + [f"{r['vs_cudnn'][n]:.2f}" if n in r["vs_cudnn"] else "-" for r in rows] for n in names]
    print("\n".join(md_table(head, body)))
    spread = max((max(v) - min(v)) / min(v) for r in rows for v in r["rounds_ms"].values())
    print(f"\nLargest spread of one candidate's rounds at one shape: {100 * spread:.1f} %")
    fails = sorted({f"{n}: {why}" for r in rows for n, why in r["failed"].items()})
    errs = {n: max(r["errors"][n] for r in rows if n in r["errors"]) for n in names
            if any(n in r["errors"] for r in rows)}
    print("\nWorst difference from lesson 04's solution (O relative, LSE absolute): "
          + ", ".join(f"{n} {e:.1e}" for n, e in errs.items()))
    if fails:
        print("\nNot timed:\n" + "\n".join(f"- {f}" for f in fails))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpu-check", action="store_true")
    ap.add_argument("--report", metavar="JSON")
    a = ap.parse_args()
    if a.report:
        sys.exit(report(a.report))
    import kernellab as kl
    kl.setup()
    sys.exit(cpu_check() if a.cpu_check else gpu_ab(a.out, a.quick, a.rounds))
