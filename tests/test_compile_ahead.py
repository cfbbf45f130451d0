"""Compiling a worker's kernels ahead (grading/worker/compile_ahead.py). Triton compiles nothing in the CPU interpreter, so
the dry pass runs here against a stand-in for Triton's JITFunction; the GPU runs in assets/gpu/grading_seconds_h100.md
are its test on real kernels. The grading's retry without it is tested with a stand-in worker."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import torch

from kernellab.grading.worker import compile_ahead


class FakeKernel:
    """Triton's launch signature: run(*args, grid, warmup, **kwargs). warmup=True compiles (here: sleeps and
    notes the thread); warmup=False would launch, which the dry pass must never do."""

    def __init__(self, name, fail=False, seconds=0.05):
        self.name, self.fail, self.seconds = name, fail, seconds
        self.compiled, self.launched = [], []

    def run(self, *args, grid, warmup, **kwargs):
        if not warmup:
            self.launched.append(args)
            return "launched"
        time.sleep(self.seconds)
        self.compiled.append((args, threading.get_ident()))
        if self.fail:
            raise RuntimeError("does not compile")
        return "compiled"

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)


def _starter(target):
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t


def _by_args(fn, args, kwargs):
    return id(fn), args, tuple(sorted(kwargs.items()))


def test_a_launch_inside_becomes_a_request_and_runs_nothing():
    k = FakeKernel("k")
    requests = []
    with compile_ahead.launches_as_requests(requests, FakeKernel):
        assert k[(4,)](1, 2, BLOCK=64) is None
        assert k.run(3, grid=(1,), warmup=True) == "compiled"  # an explicit warm-up still compiles
    assert requests == [(k, (1, 2), (4,), {"BLOCK": 64})]
    assert k.launched == []
    assert k[(1,)](5) == "launched"  # the real run's launches go through again


def test_the_dry_pass_compiles_distinct_requests_on_several_threads_and_drops_what_calls_raise():
    a, b, bad = FakeKernel("a", seconds=0.2), FakeKernel("b", seconds=0.2), FakeKernel("bad", fail=True)

    def one():
        a[(1,)](1)
        b[(1,)](1)

    def two():
        a[(1,)](1)  # the same compile as one()'s: made once
        a[(2,)](2)
        bad[(1,)](0)
        raise ValueError("the learner's host code fails on what no kernel wrote")

    def three():
        b[(1,)](7)
    t0 = time.perf_counter()
    out = compile_ahead.dry_pass([one, two, three], 4, _starter, target=FakeKernel, identity=_by_args)
    wall = time.perf_counter() - t0
    assert out["calls"] == 3 and out["stopped"] is None
    assert out["requests"] == 6 and out["distinct"] == 5
    assert out["compiled"] == 4 and out["failed"] == 1
    assert a.launched == b.launched == bad.launched == []
    assert sorted(x for x, _ in a.compiled) == [(1,), (2,)]
    threads = {t for k in (a, b) for _, t in k.compiled}
    assert len(threads) > 1  # compiled at once: four 0.2 s compiles in well under their 0.8 s sum
    assert wall < 0.6


def test_requests_triton_cannot_identify_are_all_kept():
    k = FakeKernel("k")
    reqs = [(k, (1,), (1,), {}), (k, (1,), (1,), {})]
    assert len(compile_ahead.distinct(reqs, identity=lambda *a: None)) == 2
    assert len(compile_ahead.distinct(reqs, identity=_by_args)) == 1


def test_a_dry_pass_that_loops_is_stopped_at_its_deadline_and_still_compiles_what_it_asked_for():
    k = FakeKernel("k", seconds=0.0)

    def loops():
        k[(1,)](1)
        while True:
            pass
    out = compile_ahead.dry_pass([loops, lambda: k[(1,)](2)], 2, _starter, seconds=0.3, target=FakeKernel,
                                 identity=_by_args)
    assert out["stopped"] and out["calls"] == 0
    assert [x for x, _ in k.compiled] == [(1,)]


def test_compile_threads_come_from_the_environment_or_the_cores(monkeypatch):
    monkeypatch.setenv("KERNELLAB_COMPILE_THREADS", "3")
    assert compile_ahead.threads() == 3
    monkeypatch.delenv("KERNELLAB_COMPILE_THREADS")
    from kernellab.grading.classroom.cores import usable
    assert compile_ahead.threads() == min(compile_ahead.MAX_THREADS, usable())
    from kernellab.grading.classroom.slots import GpuSlots
    assert GpuSlots(1, jobs=10_000).thread_env()["KERNELLAB_COMPILE_THREADS"] == "1"  # a class: a core each, none
    monkeypatch.setenv("KERNELLAB_COMPILE_THREADS", "2")  # unless the grading says otherwise
    assert GpuSlots(1, jobs=10_000).thread_env()["KERNELLAB_COMPILE_THREADS"] == "2"


def test_the_worker_refuses_threads_but_keeps_a_starter_of_its_own():
    code = textwrap.dedent("""
        import threading
        from kernellab.grading.worker import integrity
        start = integrity.refuse_threads()
        try:
            threading.Thread(target=print).start()
            print("started")
        except RuntimeError:
            print("refused")
        ran = []
        start(lambda: ran.append(1)).join()
        print("trusted", ran)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split("\n")[:2] == ["refused", "trusted [1]"], out.stderr


def test_budget_of_the_compile_ahead_phase_is_the_compiles():
    from kernellab.grading.judge import harness
    assert harness._budget_key("compile-ahead") == "compile"
    assert harness._budget_key("run-call") == "run" and harness._budget_key("load") == "load"


def test_the_worker_skips_the_dry_pass_without_a_gpu_or_a_record():
    from kernellab.grading.worker import child
    assert child._compile_ahead({"record": True}, [lambda: 1 / 0], _starter, lambda p: None) is None
    assert child._compile_ahead({"record": False}, [], _starter, lambda p: None) is None


def test_a_dry_pass_that_broke_the_gpu_is_graded_again_without_it(monkeypatch, tmp_path):
    """The worker says its dry pass left the GPU unusable: the grading runs it again with compile_ahead off, on
    fresh decoy cases, and keeps what it said in the record; the second worker's verdict stands."""
    from kernellab.grading.judge import harness
    from kernellab.lessons.l01_roofline_vector_add.problems import ADD
    seen = []

    def fake_run_child(jobdir, interpreted, limit_s, **kw):
        import json
        seen.append((json.loads((jobdir / "job.json").read_text()), (jobdir / "cases.pt").exists()))
        if len(seen) == 1:
            torch.save({"error": None, "ahead": {"broke": "device-side assert triggered"}}, jobdir / "result.pt")
        else:
            torch.save({"error": "the second worker's own verdict", "ahead": None}, jobdir / "result.pt")
        return None, {"exit": 0}
    monkeypatch.setattr(harness, "_run_child", fake_run_child)
    record = {}
    outcome, record = harness._grade_by_replay(ADD, ["def add(x, y):\n    return x + y\n"], 1234, None,
                                               "01_roofline_vector_add", None, record, "owner")
    assert [job["compile_ahead"] for job, _ in seen] == [True, False]
    assert all(cases for _, cases in seen)
    assert record["compile_ahead_broke"] == "device-side assert triggered"
    assert outcome.fraction == 0 and outcome.message == "the second worker's own verdict"


def test_a_worker_whose_dry_pass_went_well_is_not_graded_again(monkeypatch):
    from kernellab.grading.judge import harness
    from kernellab.lessons.l01_roofline_vector_add.problems import ADD
    runs = []

    def fake_run_child(jobdir, interpreted, limit_s, **kw):
        runs.append(1)
        torch.save({"error": "stop here", "ahead": {"calls": 3, "compiled": 5}}, jobdir / "result.pt")
        return None, {}
    monkeypatch.setattr(harness, "_run_child", fake_run_child)
    _, record = harness._grade_by_replay(ADD, ["x = 1\n"], 1, None, "01_roofline_vector_add", None, {}, "o")
    assert runs == [1] and record["compile_ahead"] == {"calls": 3, "compiled": 5}
