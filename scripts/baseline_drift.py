"""Why does lesson 04's naive-attention baseline sometimes read 8-21 % slower in one judge process than in every
other? (assets/gpu/class_grading.md: 6 of about 140 class-grading timings of it, 4.96-5.00 ms on an H200 otherwise.)

Each trial is a fresh process that times the baseline the way a judge does (timing.measure_speed, flash_speed_naive's
shape), interleaved with a candidate that allocates the way the class's submissions do:
  base_only   no candidate (a lesson 06 style baseline-only judge)
  small       SDPA: allocates only its output (most honest kernels)
  scores      allocates and writes a B*H*N*N fp16 buffer per call (the scores_in_memory cheat, honest kernels with a
              big workspace)
  random      allocates 0.3-3 GB, a different size each call (fragmentation at its worst)
  random_pool as random, but the baseline's allocations come from a memory pool of its own (torch.cuda.MemPool)
  busy_same   as small, with three CPU-bound processes on the trial's own two cores (the grading process's threads,
              computing fp64 references, were free to run on a judge's timing cores)
  busy_other  as small, with a CPU-bound process on every other core (a class's untimed work)
  gpu_beside  as small, with another process computing flash_speed_naive's fp32 reference over and over on the same
              GPU (what the grading process did after each timing, beside the next judge's, until 2026-11-26)
Every trial runs on the machine's last two cores, as a judge that times runs on the two kept for its GPU.
Each trial records the baseline's and candidate's medians, every baseline call, and the device allocator's calls
(cudaMalloc, cudaFree, frees that synchronise every stream) while it timed.

    python3 scripts/baseline_drift.py --trials 6 --out DIR     (a GPU; writes DIR/baseline_drift.json and .md)
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
VARIANTS = ("base_only", "small", "scores", "random", "random_pool", "busy_same", "busy_other", "gpu_beside")
BUSY = "while True: pass"
REFERENCES = f"""import sys; sys.path.insert(0, {str(ROOT / 'autograder')!r})
import torch, kernellab
from kernellab.lessons.l04_flash_attention.problems import SPEED_NAIVE
inputs = SPEED_NAIVE.make_inputs(torch.Generator('cuda').manual_seed(1), 'cuda')
while True:
    SPEED_NAIVE.reference_full(inputs).sum().item()
"""
STATS = ("num_device_alloc", "num_device_free", "num_sync_all_streams", "num_alloc_retries")


def trial(variant: str) -> dict:
    sys.path.insert(0, str(ROOT / "autograder"))
    import torch

    import kernellab  # noqa: F401
    from kernellab.lessons.attention import attention_sdpa_flash
    from kernellab.lessons.l04_flash_attention.problems import SPEED_NAIVE
    from kernellab.timing import measure_speed

    problem = SPEED_NAIVE
    sizes = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))

    def small(q, k, v, causal):
        return attention_sdpa_flash(q, k, v, causal)

    def scores(q, k, v, causal):
        s = torch.empty(*q.shape[:3], k.shape[2], dtype=q.dtype, device=q.device)
        s.zero_()
        return attention_sdpa_flash(q, k, v, causal)

    def random(q, k, v, causal):
        n = int(torch.randint(300, 3000, (1,), generator=sizes)) << 20
        torch.empty(n, dtype=torch.uint8, device=q.device).zero_()
        return attention_sdpa_flash(q, k, v, causal)

    cand = {"small": small, "scores": scores, "random": random, "random_pool": random, "busy_same": small,
            "busy_other": small, "gpu_beside": small}.get(variant)
    if variant == "random_pool":
        pool = torch.cuda.MemPool()

        def pooled(*a):
            with torch.cuda.use_mem_pool(pool):
                return SPEED_NAIVE.baseline(*a)
        problem = dataclasses.replace(SPEED_NAIVE, baseline=pooled)
    before = torch.cuda.memory_stats()
    t0 = time.perf_counter()
    if cand is None:
        m = measure_speed(None, problem, int.from_bytes(os.urandom(4), "little"), watch=False, parts=("base",))
    else:
        m = measure_speed(cand, problem, int.from_bytes(os.urandom(4), "little"), watch=False)
    after = torch.cuda.memory_stats()
    return {"variant": variant, "error": m.get("error"), "seconds": time.perf_counter() - t0,
            "base_median": statistics.median(m["base_ms"]) if m.get("base_ms") else None,
            "cand_median": statistics.median(m["cand_ms"]) if m.get("cand_ms") else None,
            "base_ms": [round(x, 3) for x in m.get("base_ms", [])],
            "allocator": {k: after.get(k, 0) - before.get(k, 0) for k in STATS},
            "reserved_gb": torch.cuda.memory_reserved() / 1e9}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=6, help="fresh processes per variant")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out", type=pathlib.Path)
    ap.add_argument("--trial", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.trial:
        print(json.dumps(trial(a.trial)))
        return 0
    import torch
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    import triton
    header = {"gpu": name, "torch": torch.__version__, "triton": triton.__version__,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    rows = []
    variants = a.variants.split(",")
    cores = sorted(os.sched_getaffinity(0))
    timing, others = set(cores[-2:]), set(cores[:-2])
    for t in range(a.trials):
        for v in (variants if t % 2 == 0 else variants[::-1]):  # interleaved: a trend in time hits all alike
            busy_on = {"busy_same": [timing] * 3, "busy_other": [{c} for c in others]}.get(v, [])
            busy = [subprocess.Popen([sys.executable, "-c", BUSY], preexec_fn=lambda c=c: os.sched_setaffinity(0, c))
                    for c in busy_on]
            if v == "gpu_beside":
                busy.append(subprocess.Popen([sys.executable, "-c", REFERENCES],
                                             preexec_fn=lambda: os.sched_setaffinity(0, others or timing)))
                time.sleep(8)  # its CUDA up and computing before the trial starts
            try:
                done = subprocess.run([sys.executable, __file__, "--trial", v], capture_output=True, text=True,
                                      timeout=300, preexec_fn=lambda: os.sched_setaffinity(0, timing))
            finally:
                for b in busy:
                    b.kill()
                    b.wait()
            try:
                row = json.loads(done.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                row = {"variant": v, "error": done.stderr[-400:]}
            rows.append(row)
            print(f"[{t + 1}/{a.trials}] {v:12s} base {row.get('base_median') or float('nan'):.3f} ms  "
                  f"cand {row.get('cand_median') or float('nan'):.3f}  {row.get('allocator')}  "
                  f"{row.get('error') or ''}", flush=True)
    lines = [f"# Naive-attention baseline drift: {name}", "",
             f"torch {header['torch']}, triton {header['triton']}, {header['date']}; "
             "`python3 scripts/baseline_drift.py`. Each row: one fresh process timing flash_speed_naive's baseline "
             "(30 calls) interleaved with a candidate that allocates as described in the script.", "",
             "| variant | trials | baseline medians ms (each process) | spread | candidate medians ms | device allocs / "
             "frees / synchronising frees (each process) |", "|---|---|---|---|---|---|"]
    for v in variants:
        got = [r for r in rows if r["variant"] == v and r.get("base_median")]
        med = [r["base_median"] for r in got]
        spread = (max(med) - min(med)) / statistics.median(med) if med else float("nan")
        calls = " ".join(f"{r['allocator']['num_device_alloc']}/{r['allocator']['num_device_free']}/"
                         f"{r['allocator']['num_sync_all_streams']}" for r in got)
        cand = " ".join(f"{r['cand_median']:.3f}" for r in got if r.get("cand_median")) or "-"
        lines.append(f"| {v} | {len(got)} | {' '.join(f'{x:.2f}' for x in med)} | {100 * spread:.1f} % | {cand} | "
                     f"{calls} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "baseline_drift.json").write_text(json.dumps({"header": header, "trials": rows}, indent=1))
        (a.out / "baseline_drift.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
