"""How a speed problem's worker picks its autotuned configuration: Triton's way (each configuration timed once, one
after another) against tuning.in_rounds (every configuration timed in rounds, back and forth), as the worker does
it (compiled first under tuning.compile_only, then tuned), many times over, beside each configuration's time
measured apart in many interleaved rounds (what the pick should be). GPU only.

    PYTHONPATH=autograder python scripts/autotune_rounds.py [--trials 8] [--idle 2] [--out DIR]

Lesson 02's solution matmul at its graded size (matmul_speed). ``--idle S``: the GPU left idle S seconds before
every other tuning, as a class's worker often finds it after waiting for its GPU. Writes autotune_rounds.json and
.md to --out.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time


def _name(c) -> str:
    kw = c.kwargs
    return f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} s{c.num_stages} w{c.num_warps}"


def tune_once(tuner, call, rounds: bool) -> tuple:
    """Forget the pick, compile untimed, then tune as the worker does: (picked config, its timings by config)."""
    import torch

    from kernellab.tuning import compile_only, in_rounds
    tuner.cache.clear()
    with compile_only():
        call()
    torch.cuda.synchronize()
    if rounds:
        with in_rounds():
            call()
    else:
        call()
    torch.cuda.synchronize()
    timings = {_name(c): float(t[0] if isinstance(t, (list, tuple)) else t) for c, t in tuner.configs_timings.items()}
    return _name(tuner.best_config), timings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--idle", type=float, default=2.0)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    import torch

    from kernellab.lessons.l02_tiled_matmul.problems import MATMUL_SPEED
    from kernellab.notebook_cells import load_solution
    from kernellab.report import _header
    from kernellab.tuning import allow_compile_only
    if not torch.cuda.is_available():
        print("needs a GPU")
        return 1
    allow_compile_only()
    ns = load_solution("02_tiled_matmul", ("matmul",))
    tuner, matmul = ns["matmul_kernel"], ns["matmul"]
    gen = torch.Generator(device="cuda").manual_seed(7)
    x, y = MATMUL_SPEED.make_inputs(gen, "cuda")
    call = lambda: matmul(x, y)  # noqa: E731
    runs = []
    for t in range(a.trials):
        for rounds in (False, True):
            idle = a.idle if t % 2 else 0.0
            time.sleep(idle)
            t0 = time.monotonic()
            pick, timings = tune_once(tuner, call, rounds)
            runs.append({"trial": t, "mode": "rounds" if rounds else "triton", "idle_s": idle, "pick": pick,
                         "timings_ms": timings, "tune_s": time.monotonic() - t0})
            print(runs[-1]["mode"], idle, pick, f"{runs[-1]['tune_s']:.2f} s", flush=True)
    # what each configuration takes, measured apart: the solution's matmul with the pick forced, in 12 rounds back
    # and forth (timing.interleaved), each timed by triton.testing.do_bench
    import triton.testing

    from kernellab.timing import interleaved
    key = next(iter(tuner.cache))

    def forced(cf) -> float:
        tuner.cache[key] = cf
        return triton.testing.do_bench(call, warmup=5, rep=20)
    apart = interleaved({_name(c): c for c in tuner.configs}, 12, timer=forced)
    truth = {_name(c): apart[_name(c)] for c in tuner.configs}
    best = min(truth.values())
    for r in runs:
        r["pick_ms_apart"] = truth[r["pick"]]
        r["pick_vs_best"] = truth[r["pick"]] / best
    res = {"header": _header(), "problem": "02_tiled_matmul/matmul_speed", "shape": list(x.shape) + [y.shape[1]],
           "trials": a.trials, "idle_s": a.idle, "apart_ms": truth, "runs": runs}
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "autotune_rounds.json").write_text(json.dumps(res, indent=1))
    lines = res["header"] + ["", f"Lesson 02's solution matmul at {tuple(res['shape'])} fp16, tuned {a.trials} times each way "
                             f"(idle {a.idle} s before every other tuning).", "",
                             "| configuration | measured apart (ms, median of 12 rounds) | picked by Triton | picked in rounds |",
                             "|---|---|---|---|"]
    for k, v in sorted(truth.items(), key=lambda kv: kv[1]):
        n1 = sum(r["pick"] == k for r in runs if r["mode"] == "triton")
        n2 = sum(r["pick"] == k for r in runs if r["mode"] == "rounds")
        lines.append(f"| {k} | {v:.4f} | {n1} | {n2} |")
    for mode in ("triton", "rounds"):
        worst = max(r["pick_vs_best"] for r in runs if r["mode"] == mode)
        secs = statistics.median(r["tune_s"] for r in runs if r["mode"] == mode)
        lines.append(f"\n- {mode}: slowest pick {worst:.3f}x the fastest configuration; tuning took {secs:.2f} s (median)")
    (out / "autotune_rounds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
