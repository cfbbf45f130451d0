"""Grading a class on a Ray cluster: the class queue's jobs as Ray tasks (``kernellab term autograde LESSON
--ray local`` or ``--ray ADDRESS``; Ray is the optional extra ``kernellab[cluster]``).

The instructor's process (the driver) keeps what the local queue keeps: the course secret, the result store, the
logs and, afterwards, nbgrader's gradebook. For each job it sends one task the lesson, the problem's id, the
notebook's text and that problem's seed, derived from the secret on the driver (the secret never leaves it).
The task grades with the same harness as the local queue, in fresh worker and judge processes on its node, and
returns plain data, which the driver stores under its own device's key (nbgrader, run on the driver, reads it).

Placement is Ray's, from what each task asks for: one CPU and a share of one GPU (1/N of it, N = jobs per GPU).
Within a node, the tasks on one GPU keep the local queue's rule between their grading processes
(slots.NodeGpuLock, file locks): workers and untimed judges share the GPU, a judge that times starts beside them
and has the GPU alone from the moment it times until it ends; a speed problem's worker has it alone while its
autotuning is timed, then shares it again (a program timed in its worker, lesson 06's whole block, has it alone
from its start). A grading that ran out of GPU memory or died beside other tasks is graded
once more in a task that asks Ray for the whole GPU. A node's ceilings are measured by its first task, with its GPU
alone, then read from the cache file by the others. A task that dies
costs its problem ("Grading this problem failed", not stored: a rerun tries again). Ctrl-C cancels every task with
force (its processes are killed, and the grading processes they started die with them; the kernel drops their
locks) and, for ``--ray local``, stops the cluster.
"""
from __future__ import annotations

import functools
import math
import os
import socket
import time

from ..paths import package_root, pythonpath_with_package
from .slots import once_more_alone

LOCAL = "local"
_BUDGETS = ("COMPILE_BUDGET", "RUN_BUDGET", "LOAD_BUDGET")


def _node_facts(gpu_lock=None):
    """This node's ceilings and device facts. Measured (copy bandwidth, matmul) once per GPU model, then read
    from the cache file: the first task of a run measures them with its GPU alone (``gpu_lock``, as a timing
    holds it), so that tasks starting together do not measure side by side, or beside a judge that times. Later
    calls read them from this process's memory (ceilings._cache)."""
    from ..ceilings import ceilings_known, measure_ceilings
    from ..learner import facts
    if gpu_lock is not None and not ceilings_known():
        with gpu_lock.hold(True):
            measure_ceilings(quiet=True)  # or, measured meanwhile by a task that held the GPU first, read
    return measure_ceilings(quiet=True), facts()


@functools.lru_cache(maxsize=1)
def _node_gpus() -> int:
    """How many GPUs this task's node gives Ray (asked once per worker process)."""
    import ray
    me = ray.get_runtime_context().get_node_id()
    node = next((n for n in ray.nodes() if n.get("NodeID") == me), {})
    return max(1, int(node.get("Resources", {}).get("GPU", 1)))


def _gpu_index(gpu_id: str) -> int:
    """A GPU's place among its node's (Ray's GPU ids are its CUDA device numbers there)."""
    return int(gpu_id) if str(gpu_id).isdigit() else 0


def _task_start(budgets: dict):
    from . import harness
    for name, value in budgets.items():  # the driver's budgets (a test's short ones) hold here too
        if name in _BUDGETS:
            setattr(harness, name, float(value))
    return time.time()


def grade_task(lesson: str, problem_id: str, nb_text: str, seed: int, budgets: dict) -> dict:
    """One job, on a Ray worker: grade one problem of one notebook with the harness, as the local queue does,
    its grading processes holding this task's GPU by the node's locks (NodeGpuLock)."""
    import nbformat
    import ray

    from ..lessons import problems_of
    from . import harness
    from .slots import NodeGpuLock
    started = _task_start(budgets)
    p = problems_of(lesson)[problem_id]
    nb = nbformat.reads(nb_text, as_version=4)
    gpus = [str(g) for g in ray.get_gpu_ids()]
    # no GPU: nothing is timed, nothing to share; the node's GPU count places its timing cores (grading/cores.py)
    slots = NodeGpuLock(gpus[0], index=_gpu_index(gpus[0]), gpus=_node_gpus()) if gpus else None
    ceil, facts = _node_facts(slots)
    with harness.use_slots(slots):
        outcome, record = harness.grade_problem(p, nb, seed, ceil, facts, lesson)
    record.update({"node": socket.gethostname(), "task_gpu_ids": gpus, "task_pid": os.getpid(),
                   "task_started": started, "task_ended": time.time()})
    return {"fraction": outcome.fraction, "message": str(outcome.message),
            "details": harness._jsonable(outcome.details), "record": harness._jsonable(record)}


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
        self.per_gpu = per_gpu = max(1, math.ceil(self.jobs / self.gpus)) if self.gpus else 0
        # max_calls=0: a Ray worker grades task after task (Ray's default for a task with a GPU is a fresh
        # process per task: a Python, torch, this node's ceilings and a zygote started again for every problem).
        # Its grading processes get each task's GPU (Ray sets CUDA_VISIBLE_DEVICES per task; a zygote is per GPU).
        reuse = {"max_retries": 0, "max_calls": 0}
        self._shared = ray.remote(num_cpus=1, num_gpus=(1.0 / per_gpu) if self.gpus else 0, **reuse)(grade_task)
        self._whole = ray.remote(num_cpus=min(2, self.cpus), num_gpus=1 if self.gpus else 0, **reuse)(grade_task)

    def describe(self) -> str:
        return f"Ray {'local cluster' if self.address == LOCAL else self.address}: {self.cpus} CPUs, {self.gpus} GPUs"

    def grade(self, p, nb, seed, ceil, facts, lesson):
        import nbformat

        from ..problems.base import Outcome
        from . import harness
        args = (lesson, p.id, nbformat.writes(nb), int(seed), {name: getattr(harness, name) for name in _BUDGETS})

        def run(task):
            out = self._wait(task.remote(*args))
            return Outcome(p.id, out["fraction"], out["message"], out["details"]), out["record"]
        # out of memory or died beside other tasks on its GPU: once more, in a task holding the whole GPU
        return once_more_alone(run(self._shared), self.per_gpu > 1, lambda: run(self._whole))

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
