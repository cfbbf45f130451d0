"""Grading a class on a Ray cluster: the class queue's jobs graded by Ray actors (``kernellab term autograde LESSON
--ray local`` or ``--ray ADDRESS``; Ray is the optional extra ``kernellab[cluster]``).

The instructor's process (the driver) keeps what the local queue keeps: the course secret, the result store, the
logs and, afterwards, nbgrader's gradebook. Each GPU of the cluster gets one grader (``GpuGrader``, a Ray actor
holding that GPU), which grades as the local queue does on one GPU: its jobs in threads, each job's worker and judge
processes forked from one warm zygote, under the queue's rule for its GPU (slots.GpuSlots: untimed processes share
it, a judge that times and a speed problem's worker while it tunes have it alone, a grading that ran out of GPU
memory or died beside others is graded once more alone) and on the CPU cores kept for that GPU on its node. The
driver sends a job (the lesson, the problem's id, the notebook's text and that problem's seed, derived from the
secret on the driver: the secret never leaves it) to the grader with the fewest jobs, a speed problem to the one with
the fewest speed problems, as the queue places jobs on its GPUs; the grader returns plain data, which the driver
stores under its own device's key (nbgrader, run on the driver, reads it).

One process per GPU, not a Ray task per job: on two H200s, 24 tasks each started a Python, torch and a zygote of
their own (9-16 s before the first one graded anything), and Ray, not the driver, chose their GPUs (34 and 26
problems of lesson 02; one GPU idle for the last 35 s). A cluster without GPUs gets one grader per node.
A grader measures its GPU's ceilings with the GPU alone, or reads them from its node's cache file. A grader that
dies costs the problems it was grading ("Grading this problem failed", not stored: a rerun tries again); Ray starts
it again for the rest. Ctrl-C kills every grader (the grading processes they started die with them) and, for
``--ray local`` and ``--ray nodes``, stops the cluster.

``--ray nodes`` starts a cluster of this machine as a cloud's nodes would make one: a Ray node per GPU, each with
its GPU alone (CUDA_VISIBLE_DEVICES) and its share of the cores (pinned), so that grading on N such nodes can be
compared with one node of one GPU and its cores (issue 59's scale-out: a node's cores come with its GPU).
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import socket
import threading
import time

from kernellab.paths import package_root, pythonpath_with_package
from kernellab.grading.classroom.cores import usable

LOCAL = "local"
NODES = "nodes"
_CLUSTER: list = []  # the ray.cluster_utils.Cluster of --ray nodes, while it runs
_BUDGETS = ("COMPILE_BUDGET", "RUN_BUDGET", "LOAD_BUDGET")


def _node_facts(slots=None):
    """This node's ceilings and device facts. Measured (copy bandwidth, matmul) once per GPU model, then read
    from the node's cache file: a grader measures them with its GPU alone (``slots``: its GpuSlots, held as a
    timing holds them), never beside a judge that times. Later calls read them from this process's memory
    (ceilings._cache)."""
    from kernellab.ceilings import ceilings_known, measure_ceilings
    from kernellab.learner import facts
    if slots is not None and not ceilings_known():
        with slots.hold(True):
            measure_ceilings(quiet=True)  # or, measured meanwhile by a task that held the GPU first, read
    return measure_ceilings(quiet=True), facts()


@functools.lru_cache(maxsize=1)
def _node_gpus() -> int:
    """How many GPUs this process's node gives Ray (asked once per process)."""
    import ray
    me = ray.get_runtime_context().get_node_id()
    node = next((n for n in ray.nodes() if n.get("NodeID") == me), {})
    return max(1, int(node.get("Resources", {}).get("GPU", 1)))


def _gpu_index(gpu_id: str, node_gpus: int) -> int:
    """A GPU's place among its node's, below ``node_gpus``: Ray's GPU ids are CUDA device numbers of the machine,
    and a node given one GPU of several (``start_nodes``: node 1 has GPU "1") must keep the cores of its place 0,
    not of place 1, which its share of the cores does not have (the timed cores then fell among the untimed ones:
    2026-11-29, a two-node run on one host timed node 1 on cores 28-29 while its untimed work ran on 16-29)."""
    return int(gpu_id) % max(1, node_gpus) if str(gpu_id).isdigit() else 0


def _use_budgets(budgets: dict) -> None:
    from kernellab.grading.judge import harness
    for name, value in budgets.items():  # the driver's budgets (a test's short ones) hold here too
        if name in _BUDGETS:
            setattr(harness, name, float(value))


class GpuGrader:
    """One GPU of the cluster (or one node of a cluster without GPUs), grading up to ``jobs`` problems at once: a
    Ray actor (``RayGrader`` makes it one) whose threads each grade one job with the harness, under the local
    queue's rule for its GPU."""

    def __init__(self, budgets: dict, jobs: int):
        """``budgets``: the driver's (a test's short ones hold here too); ``jobs``: this grader's jobs at once."""
        import ray

        from kernellab.grading.judge import harness
        from kernellab.grading.classroom.slots import GpuSlots
        _use_budgets(budgets)
        gpus = [str(g) for g in ray.get_gpu_ids()]
        self.gpu = gpus[0] if gpus else None
        node = _node_gpus() if gpus else 1
        # Its one GPU, placed among the node's for the cores kept per GPU, the node's jobs sharing the untimed cores.
        self.slots = GpuSlots(1, visible=gpus[:1] or None, jobs=jobs * node, first=_gpu_index(self.gpu, node),
                              node_gpus=node)
        harness._SLOTS = self.slots  # the whole process grades for this GPU (harness.use_slots, for good)
        self._jobs, self._jobs_cv = 0, threading.Condition()  # jobs inside grade(), which close() waits out
        self.slots.confine_grading()  # its own cases and references too, as the queue's grading process
        self.grade_one = self.slots.grader(lambda *a: harness.grade_problem(*a), harness._STOP)
        self.ceil, self.facts = _node_facts(self.slots if gpus else None)

    def grade(self, lesson: str, problem_id: str, nb_text: str, seed: int) -> dict:
        import nbformat

        from kernellab.lessons import problems_of
        from kernellab.grading.judge import harness
        started = time.time()
        p = problems_of(lesson)[problem_id]
        with self._jobs_cv:  # none starts once close() began: it would make files close() has already removed
            if harness._STOP.is_set():
                raise KeyboardInterrupt("this grader is stopping")
            self._jobs += 1
        try:
            outcome, record = self.grade_one(p, nbformat.reads(nb_text, as_version=4), seed, self.ceil, self.facts,
                                             lesson)
        finally:
            with self._jobs_cv:
                self._jobs -= 1
                self._jobs_cv.notify_all()
        for key in ("gpu_slot", "judge_gpu_slot"):  # the node's id for the GPU (the slot here is always 0)
            if key in record and self.gpu is not None:
                record[key] = self.gpu
        record.update({"node": socket.gethostname(), "task_gpu_ids": [self.gpu] if self.gpu is not None else [],
                       "task_pid": os.getpid(), "task_started": started, "task_ended": time.time()})
        return {"fraction": outcome.fraction, "message": str(outcome.message),
                "details": harness._jsonable(outcome.details), "record": harness._jsonable(record)}

    def close(self) -> None:
        """Stop this grader's grading: no job starts another process, its zygotes stop (and the processes forked
        from them), and what it made in the temporary folder goes (its Triton caches, the zygotes' logs).
        Called before Ray kills the grader, which runs no atexit. A job already past its last check of the stop
        may still start a zygote or make a Triton cache after the first clean-up (CI once found a zygote's folder
        left): the jobs are waited out (their processes are killed, so they end at once), then it cleans again."""
        from kernellab.grading.judge import harness
        from kernellab.grading.processes import zygote
        harness._STOP.set()
        zygote.stop_all()
        with self._jobs_cv:
            self._jobs_cv.wait_for(lambda: self._jobs == 0, timeout=15.0)
        zygote.stop_all()
        if self.slots is not None:
            self.slots.close()  # its helper that pauses processes for timings (grading/classroom/pause.py)
        harness.drop_triton_caches()

    def where(self) -> dict:
        import tempfile
        return {"node": socket.gethostname(), "gpu": self.gpu, "pid": os.getpid(), "temp": tempfile.gettempdir(),
                "pythonpath": os.environ.get("PYTHONPATH", "")}


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
        # A local cluster of this machine: its workers import kernellab from here. They inherit the environment
        # of the node ray.init starts, so PYTHONPATH is set for that start only. A job runtime_env saying the same
        # made Ray start each grader in a worker of its own for that environment: 6.7-7.4 s before two graders
        # were ready on a 2-core machine, against 2.2-2.5 s inheriting it.
        kw.setdefault("num_cpus", max(usable(), jobs or 0))  # the cores it may use (a taskset), not the machine's
        for attempt in (1, 2):
            before = _children()
            try:
                with _pythonpath(pythonpath_with_package(os.environ.get("PYTHONPATH"))):
                    ray.init(include_dashboard=False, log_to_driver=False, **kw)
                break
            except Exception as exc:  # noqa: BLE001 - one more try for a node that was slow to start, nothing else
                # Ray gives its raylet 30 s to register, a limit it does not let a caller set; on a loaded
                # two-core machine it missed it once (CI, 2026-11-26) while the same test passed 20 minutes before.
                if attempt == 2 or "timed out during startup" not in str(exc):
                    raise
                ray.shutdown()
                # The node that failed to start is not Ray's to stop (ray.init raised before it kept the node):
                # its GCS server and raylet, started by this process, are stopped here, or they outlive the run.
                _stop(set(_children()) - set(before))
    elif address == NODES:
        cluster = start_nodes(int(kw.pop("nodes", 2)), bool(kw.pop("gpus", False)))
        ray.init(address=cluster.address, log_to_driver=False, **kw)
    else:
        # Another machine's cluster: the package travels with the job (torch, triton and nbformat must be
        # installed on its nodes).
        ray.init(address=address, log_to_driver=False,
                 runtime_env={"py_modules": [str(package_root() / "kernellab")]}, **kw)
    return True


def start_nodes(n: int, gpus: bool):
    """A Ray cluster of ``n`` nodes on this machine (``ray.cluster_utils.Cluster``): node i gets GPU i alone (where
    ``gpus``) and the i-th share of this process's cores, which its raylet and every worker it forks inherit (the
    environment and CPU affinity this process has while the node starts). Stopped by ``stop_nodes``."""
    from ray.cluster_utils import Cluster
    cores = sorted(os.sched_getaffinity(0))
    share = max(1, len(cores) // n)
    cluster = Cluster()
    _CLUSTER.append(cluster)
    with _pythonpath(pythonpath_with_package(os.environ.get("PYTHONPATH"))):
        for i in range(n):
            mine = cores[i * share:(i + 1) * share] or cores
            with _as_node(mine, str(i) if gpus else None):
                cluster.add_node(num_cpus=len(mine), num_gpus=1 if gpus else 0, include_dashboard=False)
    return cluster


def stop_nodes() -> None:
    """Stop the nodes ``start_nodes`` started (their raylets, workers and the head's GCS)."""
    while _CLUSTER:
        _CLUSTER.pop().shutdown()


@contextlib.contextmanager
def _as_node(cores: list, gpu: str | None):
    """This process's CPU affinity and CUDA_VISIBLE_DEVICES for the block: what a process started meanwhile
    inherits."""
    saved_cores, saved_gpu = os.sched_getaffinity(0), os.environ.get("CUDA_VISIBLE_DEVICES")
    os.sched_setaffinity(0, cores)
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    try:
        yield
    finally:
        os.sched_setaffinity(0, saved_cores)
        if saved_gpu is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved_gpu


@contextlib.contextmanager
def _pythonpath(path: str):
    """This process's PYTHONPATH set to ``path`` for the block (what processes started meanwhile inherit)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = path
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _children() -> dict:
    """This process's child processes (pid -> command line), from /proc (none where there is no /proc)."""
    out, me = {}, os.getpid()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) != me:
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out[int(pid)] = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, ValueError, IndexError):
            continue
    return out


def _stop(pids, wait_s: float = 10.0) -> None:
    """Kill these child processes and reap them (a killed child not waited for stays a zombie)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + wait_s
    left = set(pids)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    left.discard(pid)
            except ChildProcessError:
                left.discard(pid)
        if left:
            time.sleep(0.1)


class RayGrader:
    """Connects to (or, for ``local``, starts) a Ray cluster and starts its graders: one per GPU, or one per node
    where the cluster has no GPU; ``grade`` is harness.grade_stored's ``grade``."""

    def __init__(self, address: str, jobs: int | None = None, init: dict | None = None):
        import ray
        self.started = connect(address, jobs, init)
        self.ray, self.address = ray, address
        res = ray.cluster_resources()
        self.cpus, self.gpus = int(res.get("CPU", 1)), int(res.get("GPU", 0))
        self.jobs = max(1, int(jobs or self.cpus))
        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU")]
        count = self.gpus or max(1, len(nodes))
        self.per_grader = max(1, math.ceil(self.jobs / count))
        from kernellab.grading.judge import harness
        budgets = {name: getattr(harness, name) for name in _BUDGETS}
        # max_restarts: a grader that died is started again for the jobs after; the jobs it held fail (not stored).
        # close() has a thread of its own ("control"): it runs while every job's thread is busy.
        actor = ray.remote(num_cpus=1, num_gpus=1 if self.gpus else 0, max_concurrency=self.per_grader,
                           concurrency_groups={"control": 1},
                           max_restarts=2, max_task_retries=0)(GpuGrader)
        if self.gpus:
            self.graders = [actor.remote(budgets, self.per_grader) for _ in range(count)]
        else:  # one per node: a CPU cluster's nodes are what there is to spread over
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
            self.graders = [actor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                            .remote(budgets, self.per_grader) for n in nodes] or [actor.remote(budgets, self.per_grader)]
        self._options = actor._default_options
        self._lock = threading.Lock()
        self._jobs, self._timed = [0] * len(self.graders), [0] * len(self.graders)
        self._killed = False

    def describe(self) -> str:
        where = {LOCAL: "local cluster", NODES: "nodes of this machine"}.get(self.address, self.address)
        return (f"Ray {where}: {self.cpus} CPUs, {self.gpus} GPUs, "
                f"{len(self.graders)} graders")

    def grade(self, p, nb, seed, ceil, facts, lesson):
        """One job on the grader with the fewest jobs (a speed problem: the fewest speed problems first, whose alone
        work each GPU does one after another), as the queue places jobs on its GPUs."""
        import nbformat

        from kernellab.problems.base import Outcome
        timed = getattr(p, "kind", None) == "speed"
        with self._lock:
            g = min(range(len(self.graders)),
                    key=lambda i: (self._timed[i], self._jobs[i]) if timed else self._jobs[i])
            self._jobs[g] += 1
            self._timed[g] += timed
        try:
            out = self._wait(self.graders[g].grade.remote(lesson, p.id, nbformat.writes(nb), int(seed)))
        finally:
            with self._lock:
                self._jobs[g] -= 1
                self._timed[g] -= timed
        return Outcome(p.id, out["fraction"], out["message"], out["details"]), out["record"]

    def _wait(self, ref):
        from kernellab.grading.judge import harness
        while True:
            ready, _ = self.ray.wait([ref], timeout=0.25)
            if ready:
                try:
                    return self.ray.get(ref)
                except self.ray.exceptions.RayError as exc:  # the grader died: this problem only
                    raise RuntimeError(f"the Ray grader failed: {type(exc).__name__}: {str(exc)[:300]}") from None
            if harness._STOP.is_set():
                self.kill()
                raise KeyboardInterrupt("grading interrupted")

    def kill(self) -> None:
        """End every grader now (Ctrl-C, or the class graded): each first stops its grading and removes its files
        (``GpuGrader.close``, given a few seconds), then Ray kills it; grading processes left die with it."""
        with self._lock:
            if self._killed:
                return
            self._killed = True
        # wait, not get: a grader that died or is starting again must not keep the others from being killed
        closing = [g.close.options(concurrency_group="control").remote() for g in self.graders]
        self.ray.wait(closing, num_returns=len(closing), timeout=10)
        for g in self.graders:
            self.ray.kill(g, no_restart=True)

    def close(self) -> None:
        self.kill()
        if self.started:
            self.ray.shutdown()
            if self.address == NODES:
                stop_nodes()
            self.started = False
