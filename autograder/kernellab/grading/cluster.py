"""Grading a class on a Ray cluster: the class queue's jobs as Ray tasks (``kernellab term autograde LESSON
--ray local`` or ``--ray ADDRESS``; Ray is the optional extra ``kernellab[cluster]``).

The instructor's process (the driver) keeps what the local queue keeps: the course secret, the result store, the
logs and, afterwards, nbgrader's gradebook. For each job it sends one task the lesson, the problem's id, the
notebook's text and that problem's seed, derived from the secret on the driver (the secret never leaves it).
The task grades with the same harness as the local queue, in fresh worker and judge processes on its node, and
returns plain data, which the driver stores under its own device's key (nbgrader, run on the driver, reads it).

Placement is Ray's, from what each task asks for: untimed work one CPU and a share of one GPU (1/N of it,
N = jobs per GPU), timing a whole GPU and two CPUs, so nothing else runs on a GPU while it times. A replayed
speed problem is two tasks: its worker records in an untimed task, which hands the judge's folder (records and
the kernels' cache files, as bytes) back to the driver, and a timed task runs the judge that times the replay.
A speed problem timed in its worker (lesson 06's whole block) is one timed task. Each task measures its own
node's ceilings. A task that dies costs its problem ("Grading this problem failed", not stored: a rerun tries
again). Ctrl-C cancels every task with force (its processes are killed, and the grading processes they started
die with them) and, for ``--ray local``, stops the cluster.
"""
from __future__ import annotations

import functools
import math
import os
import socket
import time

from ..paths import package_root, pythonpath_with_package
from .slots import grade_again_alone

LOCAL = "local"
_BUDGETS = ("COMPILE_BUDGET", "RUN_BUDGET", "LOAD_BUDGET")


@functools.lru_cache(maxsize=1)
def _node_facts():
    """This node's ceilings and device facts, measured once per Ray worker process."""
    from ..ceilings import measure_ceilings
    from ..learner import facts
    return measure_ceilings(quiet=True), facts()


def _task_start(budgets: dict):
    from . import harness
    for name, value in budgets.items():  # the driver's budgets (a test's short ones) hold here too
        if name in _BUDGETS:
            setattr(harness, name, float(value))
    return time.time()


def _task_end(outcome, record: dict, started: float, key: str = "task") -> dict:
    import ray

    from . import harness
    record.update({"node": socket.gethostname(), f"{key}_gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                   f"{key}_pid": os.getpid(), f"{key}_started": started, f"{key}_ended": time.time()})
    if isinstance(outcome, harness.PendingTiming):
        return {"pending": {"files": outcome.files, "judge_seed": outcome.judge_seed}, "record": record}
    return {"fraction": outcome.fraction, "message": str(outcome.message),
            "details": harness._jsonable(outcome.details), "record": harness._jsonable(record)}


def grade_task(lesson: str, problem_id: str, nb_text: str, seed: int, budgets: dict, defer: bool = False) -> dict:
    """One job, on a Ray worker: grade one problem of one notebook with the harness, as the local queue does
    (``defer``: a replayed speed problem stops before its timing and returns its judge's folder)."""
    import nbformat

    from ..lessons import problems_of
    from . import harness
    started = _task_start(budgets)
    p = problems_of(lesson)[problem_id]
    nb = nbformat.reads(nb_text, as_version=4)
    ceil, facts = _node_facts()
    outcome, record = harness.grade_problem(p, nb, seed, ceil, facts, lesson, defer_timing=defer)
    return _task_end(outcome, record, started)


def time_task(lesson: str, problem_id: str, pending: dict, record: dict, budgets: dict) -> dict:
    """The timing half of a replayed speed problem, on a GPU held whole: the judge times the replay."""
    from ..lessons import problems_of
    from . import harness
    started = _task_start(budgets)
    p = problems_of(lesson)[problem_id]
    outcome, record = harness.time_pending(p, harness.PendingTiming(pending["files"], pending["judge_seed"]),
                                           _node_facts()[0], record=record)
    return _task_end(outcome, record, started, key="timing")


def connect(address: str, jobs: int | None = None, init: dict | None = None) -> bool:
    """Join the Ray cluster at ``address``, or start one on this machine (``local``), unless this process is
    connected already. Returns whether it connected now (then ``ray.shutdown()`` is the caller's)."""
    try:
        import ray
    except ImportError as exc:
        raise SystemExit('Ray is not installed: pip install "kernellab[cluster]" (or pip install ray)') from exc
    if ray.is_initialized():
        return False
    kw = dict(init or {})
    if address == LOCAL:
        # A local cluster of this machine: its workers import kernellab from here.
        path = pythonpath_with_package(os.environ.get("PYTHONPATH"))
        kw.setdefault("num_cpus", max(os.cpu_count() or 1, jobs or 0))
        ray.init(include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}}, **kw)
    else:
        # Another machine's cluster: the package travels with the job (torch, triton and nbformat must be
        # installed on its nodes).
        ray.init(address=address, log_to_driver=False,
                 runtime_env={"py_modules": [str(package_root() / "kernellab")]}, **kw)
    return True


class RayGrader:
    """Connects to (or, for ``local``, starts) a Ray cluster; ``grade`` is harness.grade_stored's ``grade``."""

    def __init__(self, address: str, jobs: int | None = None, init: dict | None = None):
        import ray
        self.started = connect(address, jobs, init)
        self.ray, self.address = ray, address
        res = ray.cluster_resources()
        self.cpus, self.gpus = int(res.get("CPU", 1)), int(res.get("GPU", 0))
        self.jobs = max(1, int(jobs or self.cpus))
        per_gpu = max(1, math.ceil(self.jobs / self.gpus)) if self.gpus else 0
        self._untimed = ray.remote(num_cpus=1, num_gpus=(1.0 / per_gpu) if self.gpus else 0,
                                   max_retries=0)(grade_task)
        whole = {"num_cpus": min(2, self.cpus), "num_gpus": 1 if self.gpus else 0, "max_retries": 0}
        self._timed = ray.remote(**whole)(grade_task)
        self._timing = ray.remote(**whole)(time_task)

    def describe(self) -> str:
        return f"Ray {'local cluster' if self.address == LOCAL else self.address}: {self.cpus} CPUs, {self.gpus} GPUs"

    def grade(self, p, nb, seed, ceil, facts, lesson):
        import nbformat

        from ..problems.base import Outcome
        from . import harness
        budgets = {name: getattr(harness, name) for name in _BUDGETS}
        split = p.kind == "speed" and harness.replayable(p)  # worker untimed here, judge timed in its own task
        task = self._timed if p.kind == "speed" and not split else self._untimed
        out = self._wait(task.remote(lesson, p.id, nbformat.writes(nb), int(seed), budgets, split))
        shared = task is self._untimed and "pending" not in out  # it ended in a task sharing its GPU
        if "pending" in out:
            out = self._wait(self._timing.remote(lesson, p.id, out["pending"], out["record"], budgets))
        if shared and grade_again_alone(out["message"]):  # out of memory or died beside others: once more, whole
            out = self._wait(self._timed.remote(lesson, p.id, nbformat.writes(nb), int(seed), budgets, False))
            out["record"]["regraded_alone"] = True
        return Outcome(p.id, out["fraction"], out["message"], out["details"]), out["record"]

    def _wait(self, ref):
        from . import harness
        while True:
            ready, _ = self.ray.wait([ref], timeout=0.25)
            if ready:
                try:
                    return self.ray.get(ref)
                except self.ray.exceptions.RayError as exc:  # the task or its worker died: this problem only
                    raise RuntimeError(f"the Ray task failed: {type(exc).__name__}: {str(exc)[:300]}") from None
            if harness._STOP.is_set():
                self.ray.cancel(ref, force=True)
                raise KeyboardInterrupt("grading interrupted")

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()
            self.started = False
