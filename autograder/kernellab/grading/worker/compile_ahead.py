"""Compiling a worker's kernels ahead, on several threads at once (a worker on a GPU; child.py).

A correctness worker calls the learner's function on every case, one after another, and each new shape or
rotated configuration makes Triton compile while the call waits: lesson 05's backward check compiled about 37
kernels in a row, 0.8 s each on an H100, 35 s in all (assets/gpu/grading_seconds_h100.md). Here the worker first
makes one dry pass over the cases in which every Triton launch becomes a request to compile (nothing runs on the
GPU), then compiles the requests on several threads, and only then runs the cases for real, every kernel
already in Triton's cache. Triton's compile spends most of its time outside Python's lock (its MLIR passes, LLVM
and ptxas), so threads overlap. A speed worker does the same for its first call's autotuning configurations.

The dry pass changes no grade: its outputs are never looked at, whatever it raises is dropped, it stops at a
deadline, and the autotuners pick in it what they would have picked in the real run (the correctness rotation
sees the same shapes in the same order; a speed worker's untimed picks are forgotten either way). What it could
still break is the process's GPU: host code that indexes with a kernel's output that never ran could trip a
device-side assert. The worker then reports it (``broke``) and the grading runs the problem again without the
dry pass (harness._grade_by_replay), so it costs time, never points.
"""
from __future__ import annotations

import contextlib
import os
import queue
import signal
import time

MAX_THREADS = 8  # a case list's distinct compiles: lesson 05's 14 cases make about 37


def threads() -> int:
    """Threads to compile on: KERNELLAB_COMPILE_THREADS (a class queue sets each process's share of the cores),
    else this process's cores, at most MAX_THREADS. Below 2 the dry pass gains nothing and is skipped."""
    env = os.environ.get("KERNELLAB_COMPILE_THREADS")
    if env:
        return max(1, int(env))
    from kernellab.grading.classroom.cores import usable
    return min(MAX_THREADS, usable())


def broke(summary: dict | None) -> str | None:
    """What a worker's dry pass (its summary, None where it made none) said left its GPU unusable, if anything."""
    return (summary or {}).get("broke")


class _OutOfTime(Exception):
    pass


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise _OutOfTime in the main thread after ``seconds`` (a dry pass whose host code loops on values a kernel
    never wrote). Without SIGALRM (not Unix): no deadline."""
    if not hasattr(signal, "setitimer") or seconds <= 0:
        yield
        return

    def expired(*_):
        raise _OutOfTime()
    before = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


@contextlib.contextmanager
def launches_as_requests(requests: list, target=None):
    """Inside the block, a launch through ``target``'s ``run`` (Triton's JITFunction) runs nothing and returns None;
    each is appended to ``requests`` as (function, args, grid, kwargs). ``warmup`` calls (compiles) go through."""
    if target is None:
        from triton.runtime.jit import JITFunction as target
    run = target.run

    def requested(self, *args, grid, warmup, **kwargs):
        if warmup:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        requests.append((self, args, grid, kwargs))
        return None
    target.run = requested
    try:
        yield
    finally:
        target.run = run


def _identity(fn, args, kwargs):
    """What makes a request's compile distinct: the function and Triton's own specialisation of the arguments
    (types, divisibility, constexpr values, options). Requests alike are compiled once. None where Triton's binder
    cannot say (another version): that request is not merged with any."""
    try:
        from triton.runtime.driver import driver
        binder = fn.device_caches[driver.active.get_current_device()][-1]
        _, specialization, options = binder(*args, **kwargs)
        return id(fn), repr(specialization), repr(options)
    except Exception:  # noqa: BLE001
        return None


def distinct(requests: list, identity=_identity) -> list:
    """``requests`` without repeats, in their order (the first of each identity kept)."""
    seen, out = set(), []
    for fn, args, grid, kwargs in requests:
        key = identity(fn, args, kwargs)
        if key is not None and key in seen:
            continue
        if key is not None:
            seen.add(key)
        out.append((fn, args, grid, kwargs))
    return out


def compile_requests(requests: list, n_threads: int, start_thread) -> dict:
    """Compile each request (Triton's ``run`` with warmup=True: compile and cache, launch nothing) on up to
    ``n_threads`` threads started by ``start_thread(target) -> thread`` (the worker refuses threads to learner
    code: child.py hands over its own starter). A request that fails to compile is only counted: the real run
    compiles it again and reports its error there. Returns {"compiled", "failed"}."""
    work: queue.SimpleQueue = queue.SimpleQueue()
    for r in requests:
        work.put(r)
    done: list = []

    def compile_some():
        while True:
            try:
                fn, args, grid, kwargs = work.get_nowait()
            except queue.Empty:
                return
            try:
                fn.run(*args, grid=grid, warmup=True, **kwargs)
                done.append(True)
            except Exception:  # noqa: BLE001 - the real run meets it again and says why
                done.append(False)
    started = [start_thread(compile_some) for _ in range(max(0, min(n_threads, len(requests)) - 1))]
    compile_some()  # this thread compiles too
    for t in started:
        t.join()
    return {"compiled": sum(done), "failed": len(done) - sum(done)}


def dry_pass(calls, n_threads: int, start_thread, seconds: float = 30.0, target=None, identity=_identity) -> dict:
    """Make each of ``calls`` (no arguments; the learner's function on one case's inputs) with launches as requests,
    within ``seconds`` in all, then compile the distinct requests on ``n_threads`` threads. Whatever a call raises
    is dropped (the real run raises it again). Returns what happened, for the grading record: calls made, requests,
    distinct ones, compiled, failed, seconds, and "stopped" when the deadline cut the calls short."""
    t0 = time.perf_counter()
    requests: list = []
    made, stopped = 0, None
    with launches_as_requests(requests, target):
        try:
            with deadline(seconds):
                for call in calls:
                    try:
                        call()
                    except _OutOfTime:
                        raise
                    except BaseException:  # noqa: BLE001 - a dry call's failure is the real call's to report
                        pass
                    made += 1
        except _OutOfTime:
            stopped = f"deadline of {seconds:.0f} s"
    unique = distinct(requests, identity)
    out = {"calls": made, "requests": len(requests), "distinct": len(unique), "stopped": stopped}
    out.update(compile_requests(unique, n_threads, start_thread))
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out
