"""Timing on the learner's GPU.

Both timers put CUDA events around each run, after flushing the L2 and queueing a GPU-side wait
(``gpu_wait``) so that the host's launch cost is not timed. ``bench`` is for exploring (sweeps,
plots, the benchmark): median of many runs, after a first call that compiles and autotunes.
``measure_speed`` is for grading: fresh inputs refilled before every timed run, baseline and
candidate interleaved (A/B/B/A...), outputs re-checked after timing, and a synchronised wall-clock
cross-check so that work hidden on a side stream cannot look fast.
"""
from __future__ import annotations

import functools
import os
import statistics
import time

import torch

from .problems.base import SKETCH, SpeedProblem, call_learner, seeded_generator
from .watch import watched

# Host time a whole training step's timing hides (SpeedProblem.host_ms): the steps of lessons 06 and 07 took
# 1.3-3.3 ms of host time per step on an H100's host (assets/bench/lesson07_step_host.md); a slower host (a
# learner's) may take twice that. Both sides of the comparison get the same wait.
STEP_HOST_MS = 10.0

def bench(fn, warmup_ms: float = 25, rep_ms: float = 100, hide_ms: float | None = None) -> float:
    """Median milliseconds of ``fn()`` on the GPU: L2 flushed and the host's launch cost hidden before
    every run (compile/autotune excluded by a first call). ``hide_ms``: the host time per call to hide
    (gpu_wait); None hides ~0.5-1 ms, enough for a few launches."""
    fn()  # first call compiles; keep it out of the numbers
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        fn()
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / 3, 1e-3)
    for _ in range(max(1, int(warmup_ms / est))):
        fn()
    n = max(5, min(200, int(rep_ms / (est + 0.3))))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        _flush_l2()
        gpu_wait(ms=hide_ms)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(starts, ends))


def gpu_wait(cycles: int = 1_000_000, ms: float | None = None) -> None:
    """Keep the GPU busy (~0.5-1 ms, or about ``ms``) while the host launches the next call. The start event
    after it then fires only once that launch is queued, so host-side launch cost - Python and Triton's
    launcher take tens of microseconds, cuBLAS a few - is not counted as kernel time. A whole training step
    needs ``ms`` (STEP_HOST_MS; assets/bench/lesson07_step_timer.md). Waiting hides only host work that needs no
    result from the GPU: anything that reads one waits out the sleep."""
    if ms is not None:
        cycles = max(cycles, int(ms * _cycles_per_ms()))
    torch.cuda._sleep(cycles)


_CALIBRATION: dict = {}


def _cycles_per_ms() -> float:
    """torch.cuda._sleep's cycles per millisecond on this GPU (it counts SM clock cycles): the fastest of three
    runs. A wait asked for in milliseconds lasts about that long: 9.83 ms for 10 on an H100 (2026-11-26), the
    clock a little higher in a long wait than in this one."""
    if "cycles_per_ms" not in _CALIBRATION:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(3):
            s.record()
            torch.cuda._sleep(2_000_000)
            e.record()
            e.synchronize()
            best = min(best, s.elapsed_time(e))
        _CALIBRATION["cycles_per_ms"] = 2_000_000 / max(best, 1e-3)
    return _CALIBRATION["cycles_per_ms"]


def interleaved(fns: dict, rounds: int, hide_ms: float | None = None, timer=None) -> dict:
    """name -> median ms over ``rounds`` rounds, contenders alternating within each round (``hide_ms``: bench).
    ``timer(fn) -> ms`` replaces the course timer (a sweep reporting ``triton.testing.do_bench`` passes one)."""
    timer = timer or (lambda fn: bench(fn, warmup_ms=10, rep_ms=60, hide_ms=hide_ms))
    times = {k: [] for k in fns}
    keys = list(fns)
    for r in range(rounds):
        for k in (keys if r % 2 == 0 else keys[::-1]):
            times[k].append(timer(fns[k]))
    return {k: statistics.median(v) for k, v in times.items()} | {f"{k}_all": v for k, v in times.items()}


def do_bench_ms(fns: dict, warmup: int = 25, rep: int = 100) -> dict:
    """name -> ``triton.testing.do_bench`` median ms of each ``fn()``: the time PyTorch code pays, launches
    included, to report beside the course timer (which hides them) where the two can differ."""
    from triton.testing import do_bench
    return {k: do_bench(f, warmup=warmup, rep=rep, return_mode="median") for k, f in fns.items()}


def time_steps(fns: dict, rounds: int) -> tuple[dict, dict]:
    """Training steps (name -> callable()) as the graded step problems time them, the host's time hidden
    (STEP_HOST_MS) and contenders interleaved (``interleaved``'s dict), and by do_bench, launches paid."""
    return interleaved(fns, rounds, STEP_HOST_MS), do_bench_ms(fns)


def _sync_if_gpu() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def host_enqueue_ms(fns: dict, n: int = 20) -> dict:
    """name -> {"host_ms", "wall_ms"}: median time the host takes to enqueue one ``fn()`` (no synchronisation
    inside) and to its completion. Host time above the GPU's makes a step host-bound: the GPU waits for launches."""
    sync = _sync_if_gpu
    out = {}
    for name, fn in fns.items():
        host, wall = [], []
        for _ in range(n):
            sync()
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            sync()
            host.append((t1 - t0) * 1e3)
            wall.append((time.perf_counter() - t0) * 1e3)
        out[name] = {"host_ms": statistics.median(host), "wall_ms": statistics.median(wall)}
    return out


def host_us(fn, n: int = 50, rounds: int = 7) -> float:
    """Microseconds of the host's time per call of ``fn()`` with the GPU not waited on: ``n`` calls back to back,
    timed on the host's clock and divided by ``n``, the median of ``rounds`` such batches (a synchronise between
    batches, untimed, so that the launch queue never fills and blocks a call). This is what a program pays on the
    host for each call whatever the GPU does; where it exceeds the GPU's time per call, the GPU waits for the host
    and do_bench reads it, not the kernel (the course timer hides it). Works on the CPU too (no GPU to wait for)."""
    sync = _sync_if_gpu
    fn()
    sync()
    per = []
    for _ in range(max(1, rounds)):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) * 1e6 / n)
    sync()
    return statistics.median(per)


def launch_paid(fns: dict, n_host: int = 30) -> dict:
    """name -> {"do_bench_ms", "host_us"}: what each callable costs with its launches paid (do_bench's median) and
    its host time per call (host_us), for a benchmark row beside the course timer's number."""
    db = do_bench_ms(fns)
    return {k: {"do_bench_ms": db[k], "host_us": host_us(f, n=n_host, rounds=5)} for k, f in fns.items()}


def add_launch_paid(row: dict, fns: dict, base: str | None = None, n_host: int = 30) -> dict:
    """Add each callable's do_bench ms and host us to a benchmark row (keys ``<name>_do_bench_ms``,
    ``<name>_host_us``), and ``do_bench_vs_<base>`` for each other one when ``base`` is given."""
    paid = launch_paid(fns, n_host)
    for k, v in paid.items():
        row[f"{k}_do_bench_ms"], row[f"{k}_host_us"] = v["do_bench_ms"], v["host_us"]
    if base is not None:
        for k in fns:
            if k != base:
                row[f"{k}_do_bench_vs_{base}"] = paid[base]["do_bench_ms"] / paid[k]["do_bench_ms"]
    return row


def back_to_back_ms(fn, n: int = 200, rounds: int = 1) -> dict:
    """Per call of ``fn()`` issued ``n`` times back to back (the GPU runs behind): ``issue_ms``, the host's own time,
    and ``wall_ms``, up to the last call's completion (one synchronise); the best of ``rounds`` batches, after one
    untimed call."""
    sync = _sync_if_gpu
    fn()
    sync()
    issue, wall = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        sync()
        issue.append((t1 - t0) * 1e3 / n)
        wall.append((time.perf_counter() - t0) * 1e3 / n)
    return {"issue_ms": min(issue), "wall_ms": min(wall)}


_FLUSH = {}


def _poison(out) -> None:
    """NaN into a finished output (tensor or tuple of them) before its memory is freed and reused."""
    for t in (out if isinstance(out, (tuple, list)) else (out,)):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            with torch.no_grad():
                t.detach().fill_(float("nan"))


def _flush_l2():
    buf = _FLUSH.get("buf")
    if buf is None:
        buf = _FLUSH["buf"] = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device="cuda")  # 256 MB
    buf.zero_()


def _pool(problem: SpeedProblem, seed: int, device: str, sets: int = 2) -> list:
    gen = seeded_generator(seed) if device == "cpu" else torch.Generator(device=device).manual_seed(seed)
    return [problem.make_inputs(gen, device) for _ in range(sets)]


def untimed_runs(fn, problem: SpeedProblem, live: list, ready, sync):
    """The untimed runs before timing, where compilation and autotuning happen: the candidate three times, the
    baseline (made by the problem's ``baseline_setup`` if it has one) twice; then ``ready()``, if given, and each
    side once more. Returns the baseline to time."""
    for _ in range(3):
        fn(*live)
    sync()
    baseline = problem.baseline_setup(live) if problem.baseline_setup else problem.baseline
    for _ in range(2):
        baseline(*live)
    sync()
    if ready is not None:
        ready()
        fn(*live)
        baseline(*live)
        sync()
    return baseline


def measure_speed(fn, problem: SpeedProblem, seed: int, rounds: int = 5, reps: int = 6,
                  progress=None, watch: bool = True, hook: bool = True,
                  ready=None) -> dict:
    """Time ``fn`` against the problem's baseline; returns plain data for ``judge_speed``. The grade of record
    runs it in the judge on a replay of the learner's recorded call (``watch=False``: a replay is only
    Triton launches and allowed allocations by construction); a learner's check runs it on the function.
    ``hook``: call ``fn`` through the problem's call hook (False: ``fn`` is a replay that recorded the hook too).
    ``ready``: called once inputs are made and both sides warmed up, before anything is timed (a judge under a class
    queue asks for its GPU alone there, so its setup, kernel loading and warm-up do not hold the GPU from others);
    each side then runs once more, untimed, on the GPU it now has to itself."""
    device = "cuda"
    pool = _pool(problem, seed, device)
    live = [t.clone() if isinstance(t, torch.Tensor) else t for t in pool[0]]  # numbers (an eps) pass as they are
    rand = int.from_bytes(os.urandom(8), "little")
    pick = torch.Generator(device="cpu").manual_seed(rand)
    result = {"cand_ms": [], "base_ms": [], "sketches": [], "error": None, "wall_ms": None}
    # Before each timed run, outside its timing: a replay poisons the memory its call allocates (judge.py).
    before_timed_call = getattr(fn, "before_timed_call", None) or (lambda: None)
    if hook:
        fn = functools.partial(call_learner, problem, fn)  # the problem's call hook, if it has one

    def refill(i):
        for dst, src in zip(live, pool[i]):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)

    try:
        baseline = untimed_runs(fn, problem, live, ready, torch.cuda.synchronize)
    except Exception as exc:  # noqa: BLE001
        from .invoke import describe_exception
        result["error"] = describe_exception(exc, f"`{problem.names[0]}` at the timed size")
        return result

    start = [torch.cuda.Event(enable_timing=True) for _ in range(rounds * reps)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(rounds * reps)]
    bstart = [torch.cuda.Event(enable_timing=True) for _ in range(rounds * reps)]
    bend = [torch.cuda.Event(enable_timing=True) for _ in range(rounds * reps)]
    watch_rep = [int(torch.randint(reps, (1,), generator=pick)) for _ in range(rounds)]
    k = 0
    for r in range(rounds):
        order = ("cand", "base") if r % 2 == 0 else ("base", "cand")
        for who in order:
            for j in range(reps):
                i = (k + j) % len(pool)
                refill(i)
                if who == "cand":
                    before_timed_call()
                _flush_l2()
                gpu_wait(ms=problem.host_ms)
                if who == "base":
                    bstart[r * reps + j].record()
                    done = baseline(*live)
                    bend[r * reps + j].record()
                    _poison(done)  # its freed output must not become the candidate's "uncomputed" output
                    del done
                    continue
                if watch and j == watch_rep[r]:  # an untimed, watched run among the timed ones
                    with watched() as st:
                        out = fn(*live)
                    torch.cuda.synchronize()
                    result["error"] = st.misuse(f"`{problem.names[0]}` at the timed size")
                    if result["error"]:
                        return result
                    start[r * reps + j] = end[r * reps + j] = None
                else:
                    start[r * reps + j].record()
                    out = fn(*live)
                    end[r * reps + j].record()
                torch.cuda.synchronize()
                try:
                    flat = (problem.sketch_of(out) if problem.sketch_of else out).reshape(-1)
                except Exception:  # noqa: BLE001 - not the tensor(s) the problem asks for
                    result["error"] = (f"`{problem.names[0]}` at the timed size returned {type(out).__name__}, "
                                       "not what the problem asks for (see its correctness check).")
                    return result
                idx = torch.randint(flat.numel(), (SKETCH,), generator=pick)
                result["sketches"].append((i, idx, flat[idx.to(flat.device)].detach().cpu()))
                _poison(out)
                del out, flat
        k += reps
        if progress is not None:
            progress.update(1)
    torch.cuda.synchronize()
    result["base_ms"] = [s.elapsed_time(e) for s, e in zip(bstart, bend)]
    result["cand_ms"] = [s.elapsed_time(e) for s, e in zip(start, end) if s is not None]
    # Cross-check: back-to-back calls, one device synchronize, host clock. Work launched on
    # another stream is not inside the events above but is inside this.
    # The host's own time to issue the calls is measured too: a kernel shorter than its launch (~50 us
    # on a GPU, ~80 us for a Triton launch on some hosts) is bounded by the host, not by hidden work.
    # The best of three batches: escaped work is in every batch, a host stall in one. A single batch once read
    # 5.148 ms a call against 2.291 ms on the GPU for an honest kernel (a 17 ms stall in six calls; two H200s,
    # 2026-11-26) and timed it at 5.148 ms.
    refill(0)
    torch.cuda.synchronize()
    result.update(back_to_back_ms(lambda: fn(*live), n=reps, rounds=3))
    return result


def escaped(wall_ms: float | None, gpu_ms: float, issue_ms: float | None) -> bool:
    """Did work escape the timing events? Back-to-back calls with one synchronise cost at most the larger
    of the GPU time and the host's time to issue them (short kernels are launch-bound); much more than
    that is work the events did not see (a side stream)."""
    if wall_ms is None:
        return False
    return wall_ms > 1.5 * max(gpu_ms, issue_ms or 0.0) + 0.05


def judge_speed(problem: SpeedProblem, seed: int, m: dict, ceil=None):
    """Trusted side: re-check sampled outputs, apply the roofline floor, pick the band."""
    from .compare import REL_TOL
    from .problems.base import Outcome

    pid = problem.id
    if m.get("error"):
        return Outcome(pid, 0.0, m["error"], {})
    device = "cuda"
    pool = _pool(problem, seed, device)
    full = {}
    for i, idx, vals in m["sketches"]:
        if problem.reference_full is not None:
            if i not in full:
                full[i] = problem.reference_full(pool[i]).reshape(-1)
            ref = full[i][idx.to(device)].double().cpu()
        else:
            ref = problem.reference_at(pool[i], idx.to(device)).double().cpu()
        got = vals.double()
        if not torch.isfinite(got).all():
            return Outcome(pid, 0.0, "Outputs during the timed runs contained NaN or inf.", {})
        err = ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()
        if err > REL_TOL.get(vals.dtype, 1e-5):
            return Outcome(pid, 0.0, (f"Outputs during the timed runs were wrong (relative error {err:.1e}): "
                                      "a result cached from an earlier call, or a kernel that is wrong at this "
                                      "size?"), {"sketch_error": err})
    del pool, full
    t_c = statistics.median(m["cand_ms"])
    t_b = statistics.median(m["base_ms"])
    details = {"cand_ms_median": t_c, "base_ms_median": t_b, "wall_ms": m["wall_ms"],
               "cand_ms": m["cand_ms"], "base_ms": m["base_ms"]}
    notes = []
    details["issue_ms"] = m.get("issue_ms")
    if escaped(m["wall_ms"], t_c, m.get("issue_ms")):
        notes.append(f"work escaped the timing events (synchronised time {m['wall_ms']:.3f} ms vs "
                     f"{t_c:.3f} ms on the GPU and {m.get('issue_ms') or 0:.3f} ms to issue the calls): side "
                     "streams? The synchronised time counts.")
        t_c = m["wall_ms"]
        details["escaped_events"] = True
    # Physical floor: nothing moves its minimum bytes faster than the device's copy bandwidth.
    gen = torch.Generator(device=device).manual_seed(seed)
    sample = problem.make_inputs(gen, device)
    need = problem.bytes_moved(sample)
    flops = problem.flops(sample) if problem.flops else 0
    floors = []  # (ms, what): nothing beats the device's measured ceilings by more than 25 %
    copy_gbps, matmul_tflops = getattr(ceil, "copy_gbps", None), getattr(ceil, "fp16_tflops", None)
    if copy_gbps:
        floors.append((need / (copy_gbps * 1e9 * 1.25) * 1e3, f"move the {need / 1e6:.0f} MB the problem needs"))
    if flops and matmul_tflops:
        floors.append((flops / (matmul_tflops * problem.flop_rate * 1e12 * 1.25) * 1e3, f"do the {flops / 1e9:.0f} GFLOP it needs"))
    if floors:
        floor_ms, what = max(floors)
        details["floor_ms"] = floor_ms
        if t_c < floor_ms:
            return Outcome(pid, 0.0, (f"Measured {t_c:.3f} ms, faster than this GPU can {what} "
                                      f"(>= {floor_ms:.3f} ms). The time is rejected and flagged for the "
                                      "instructor."), dict(details, flagged=True))
    if problem.metric == "bandwidth":
        cand_gbps = need / (t_c * 1e-3) / 1e9
        base_gbps = problem.baseline_bytes(sample) / (t_b * 1e-3) / 1e9
        value = cand_gbps / base_gbps
        numbers = (f"{cand_gbps:.0f} GB/s vs {base_gbps:.0f} GB/s for {problem.baseline_name}: "
                   f"{value:.2f} of it")
        details.update(cand_gbps=cand_gbps, base_gbps=base_gbps)
    else:
        value = t_b / t_c
        numbers = (f"{t_c:.3f} ms vs {t_b:.3f} ms for {problem.baseline_name}: {value:.2f}x")
        if flops:
            details.update(cand_tflops=flops / t_c / 1e9, base_tflops=flops / t_b / 1e9)
            numbers += f" ({flops / t_c / 1e9:.0f} vs {flops / t_b / 1e9:.0f} TFLOP/s)"
    del sample
    frac, band = problem.band(value)
    details.update(value=value, band=band)
    msg = f"{numbers} (band {band}, {frac:.0%} of the points)."
    if notes:
        msg += " Note: " + " ".join(notes)
    return Outcome(pid, frac, msg, details)
