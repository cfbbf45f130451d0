"""Who may use each GPU while a class is graded: any number of untimed processes at once, or one timed process
alone.

A grading job (one problem of one submission) is placed on one GPU for its whole life (``place``: the GPU with
the fewest jobs; a speed problem, the GPU with the fewest speed problems, as their alone work decides when a GPU is
done). Each process it starts holds that GPU while it runs (``hold``): a worker, or a judge that
replays for correctness, shares it; a judge that times, a speed problem's worker while it autotunes (each asks
when it is ready: ``ask_for_gpu_alone``; the worker shares again once tuned: ``ask_to_share``) and a worker that
times a whole program (lesson 07) hold it alone. A timed process that is waiting lets no new untimed one start on its
GPU, so timing is never starved. It does not wait for the untimed processes already running there to end: it pauses
them (grading/classroom/pause.py: each one's CUDA locked by the driver, its work submitted so far completed), and they go on
when it ends or hands the GPU back (``share``); one that cannot be paused yet it waits for. On one H200 that made
lessons 04 and 02 31-32 % faster (assets/gpu/class_grading_pause_1315utc/): the GPU no longer emptied before each
batch of timings. GPUs do not wait for each other: a timed run on GPU 0 leaves GPU 1's untimed work going (the
timer reads the GPU, which they do not touch).

A job whose process ran out of GPU memory beside others (another submission's huge buffers can cause it), or whose
timed runs had to retry allocations for want of memory, is graded once more with its GPU alone (``grader``,
``whole_gpu``, ``once_more_alone``), so memory taken by others never costs it points.

Each process's CPU threads are capped at its share of the cores (``thread_env``). CPU cores are kept the same
way (grading/classroom/cores.py): where the machine has cores to spare, two per GPU are its timed
process's, and every untimed grading process runs on the others, so a host-bound timed step (Python launching
kernels) never waits for a core that compiling or autotuning took.

Grading one notebook (nbgrader, ``kernellab grade``) uses no slots: one process at a time is alone anyway.

On a Ray cluster each GPU's grader (grading/classroom/cluster.py) keeps the same rule with a GpuSlots of its one GPU.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import threading
import time

from kernellab.grading.classroom import pause
from kernellab.grading.classroom.cores import affinity, pin, threads_each, timing_cores, untimed_cores


class GpuSlots:
    def __init__(self, gpus: int = 1, visible: list[str] | None = None, jobs: int | None = None,
                 first: int = 0, node_gpus: int | None = None):
        """``gpus``: how many GPUs (or, on a CPU, how many independent slots); ``visible``: each one's
        CUDA_VISIBLE_DEVICES value (default: this process's own list, or 0..gpus-1); ``jobs``: how many grade at
        once on this machine, whose processes then share the untimed cores out for their CPU threads
        (``thread_env``; None: no cap). ``first`` and ``node_gpus``: where these GPUs are among the machine's, for
        the cores kept per GPU (a Ray node's grader holds one GPU of several: grading/classroom/cluster.py)."""
        self.n = max(1, int(gpus))
        self.first, self.node_gpus = int(first), max(self.n, int(node_gpus or self.n))
        # The cores this process may use now, before it confines itself to the untimed ones (confine_grading).
        self.all_cores = affinity()
        self.threads = threads_each(jobs, self.node_gpus, self.all_cores) if jobs else None
        if visible is None:
            own = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
            visible = own[:self.n] if len(own) >= self.n else [str(i) for i in range(self.n)]
        self.visible = list(visible)
        self._cv = threading.Condition()
        self._alone = [False] * self.n  # a timed process running on each GPU
        self._waiting = [0] * self.n  # timed processes waiting for each GPU
        self._jobs = [0] * self.n  # jobs placed on each GPU
        self._timed_jobs = [0] * self.n  # of which speed problems (their timing and tuning need the GPU alone)
        self._placed = [0] * self.n  # jobs ever placed on each GPU (did another start beside mine?)
        self._local = threading.local()
        self.timed_runs = 0  # how many timed processes ran (a test's count)
        self.pauses = [0, 0]  # untimed processes paused for timings, and timings that waited for one to be pausable
        # The untimed holds of each GPU (their Held: a process's pid once it has started, which a timed hold there
        # pauses; none for this process's own GPU work); seconds each process spent paused (no budget counts them).
        self._holders = [set() for _ in range(self.n)]
        self._paused_s: dict = {}
        self._paused_at: dict = {}  # pid -> when its pause began, while it lasts
        self._pause_spans: dict = {}  # pid -> [[start, end]] wall-clock, what its record shows
        self.pauser = pause_here()

    @contextlib.contextmanager
    def place(self, timed: bool = False):
        """Place the calling thread's job on the GPU with the fewest jobs, for the block's duration; a ``timed``
        job (a speed problem) on the GPU with the fewest timed jobs first: each GPU does its timed jobs' alone
        work one after another, so where they pile up decides when a class's last, timed, jobs end."""
        with self._cv:
            gpu = min(range(self.n), key=lambda g: (self._timed_jobs[g], self._jobs[g]) if timed else self._jobs[g])
            self._jobs[gpu] += 1
            self._timed_jobs[gpu] += timed
            self._placed[gpu] += 1
        self._local.gpu = gpu
        try:
            yield gpu
        finally:
            self._local.gpu = None
            with self._cv:
                self._jobs[gpu] -= 1
                self._timed_jobs[gpu] -= timed

    def gpu(self) -> int:
        g = getattr(self._local, "gpu", None)
        return 0 if g is None else g

    def env(self) -> dict:
        """Environment for a process of the calling thread's job: its GPU, alone visible."""
        return {"CUDA_VISIBLE_DEVICES": self.visible[self.gpu()]}

    def thread_env(self) -> dict:
        """Environment that caps a grading process's CPU threads (torch's OpenMP pool, MKL) at ``threads``. Each
        would otherwise start one thread per core for its CPU work (inputs, copies), and a class's processes at
        once then run many times more threads than there are cores: on two H100s with 32 cores, lesson 03's
        18 jobs took 30 % longer in their processes than with one thread each (assets/gpu/class_grading.md).
        A worker's threads compiling ahead (grading/worker/compile_ahead.py) take the same share (with one each, none),
        unless KERNELLAB_COMPILE_THREADS is set for the whole grading."""
        if not self.threads:
            return {}
        return {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads),
                "KERNELLAB_COMPILE_THREADS": os.environ.get("KERNELLAB_COMPILE_THREADS") or str(self.threads)}

    def confine_grading(self) -> tuple:
        """Cap the grading process's own torch CPU threads as each grading process's are (``threads``; no cap
        without one), and move all its threads (and those it starts) onto the untimed cores; returns what it had
        (threads, cores). Its job threads make cases and compute fp64 references at once, and with OpenMP each
        calling thread's parallel op can start a team of one thread per core: lesson 04's references took the
        grading process 115-142 s of CPU on two H200s (32 cores), beside the grading processes' own, and they ran
        on the timing cores too. A timed judge hides the host behind a GPU-side wait; a tuning worker's autotuner
        does not, and it picked a configuration 10 % slower in three of three two-GPU runs (class_grading.md). A Ray
        grader confines itself for good (grading/classroom/cluster.py)."""
        import torch
        before = torch.get_num_threads(), affinity()
        if self.threads:
            torch.set_num_threads(self.threads)
        untimed = self.cores(False)
        if untimed != self.all_cores:  # none kept for timing where cores are few: nothing to move off
            pin(os.getpid(), untimed)
        return before

    @contextlib.contextmanager
    def grading_threads(self):
        """For the block, ``confine_grading``; as before after it (the queue, for a class)."""
        import torch
        threads, cores = self.confine_grading()
        try:
            yield
        finally:
            torch.set_num_threads(threads)
            if cores:
                pin(os.getpid(), cores)

    def cores(self, alone: bool) -> set:
        """CPU cores for a process of the calling thread's job: its GPU's timing cores when it times, else the
        untimed ones (empty: no cores kept, it runs anywhere). Of the cores this process had when the slots were
        made, not of those it is confined to since."""
        if alone:
            return timing_cores(self.first + self.gpu(), self.node_gpus, self.all_cores)
        return untimed_cores(self.node_gpus, self.all_cores)

    @contextlib.contextmanager
    def hold(self, alone: bool, stop: threading.Event | None = None, before_waiting: bool = False):
        """Hold the calling job's GPU for one process: shared (untimed) or ``alone`` (timed). ``stop`` set while
        waiting raises KeyboardInterrupt (a class queue's Ctrl-C). ``before_waiting``: a shared hold that may start
        while timed holds wait, though never while one runs (short work of bounded count, which cannot starve
        them). A timed hold pauses the untimed processes already running on its GPU (``_pause_others``) and lets
        them go on when it ends or is shared (``_end_pause``); those it cannot pause, and holds with no process
        (this process's own GPU work), it waits for."""
        g = self.gpu()
        if getattr(self._local, "whole", False):  # the job already has its GPU alone (whole_gpu)
            yield Held(g, alone, whole=True)
            return
        held = Held(g, alone)
        with self._cv:
            if alone:
                self._waiting[g] += 1
                try:
                    while self._alone[g] or any(not self._pausable(h) for h in self._holders[g]):
                        self._wait(stop)
                finally:
                    self._waiting[g] -= 1
                self._alone[g] = True
                self.timed_runs += 1
                others = list(self._holders[g])
            else:
                while self._alone[g] or (self._waiting[g] and not before_waiting):
                    self._wait(stop)
                self._holders[g].add(held)
        try:
            if alone and others:
                self._pause(held, self._pause_others(g, others, stop))
            yield held
        finally:
            self._end_pause(held)
            with self._cv:
                if held.alone:
                    self._alone[g] = False
                else:
                    self._holders[g].discard(held)
                self._cv.notify_all()

    def _pausable(self, held: "Held") -> bool:
        return self.pauser is not None and held.pid is not None

    def _pause_others(self, g: int, others: list, stop) -> list:
        """Pause each of ``others`` (untimed holds of GPU ``g``) that is still held; one that cannot be paused yet is
        asked again every 0.2 s until it can be or has ended. Returns [(held, Paused, when)] to resume."""
        paused, todo, waited = [], list(others), False
        while todo:
            stuck = []
            for h in todo:
                with self._cv:
                    if h not in self._holders[g]:
                        continue  # ended meanwhile
                since = time.monotonic()
                p = self.pauser.pause(h.pid)
                if p is None:
                    stuck.append(h)
                    continue
                paused.append((h, p, since))
                with self._cv:
                    self._paused_at[h.pid] = (since, time.time() - (time.monotonic() - since))
            if stuck:  # not pausable yet (no context so far, a lock that failed): ask again shortly, or it ends
                waited = True
                with self._cv:
                    self._wait(stop)
            todo = stuck
        with self._cv:
            self.pauses[0] += len(paused)
            self.pauses[1] += waited
        return paused

    def _pause(self, held: "Held", paused: list) -> None:
        """``held`` (a timed hold) keeps the others it paused until it ends or is shared (``_end_pause``); while it
        lasts, every 50 ms, what they started since is paused too. One that cannot be paused then is killed with its
        tree (its job fails, and is graded again with the GPU alone: once_more_alone): nothing may run beside a
        timing."""
        if not paused:
            return
        done = threading.Event()

        def watch():
            while not done.wait(0.05):
                for _, p, _ in paused:
                    if not p.refresh(running=True):
                        for q in pause.tree(p.pid):
                            try:
                                os.kill(q, signal.SIGKILL)
                            except OSError:
                                pass
        t = threading.Thread(target=watch, name="kl-pause-watch", daemon=True)
        held.paused, held.watch = paused, (done, t)
        t.start()

    def _end_pause(self, held: "Held") -> None:
        """Let go on what ``held`` paused: when it ends, and when it is shared. Not later: a process it paused may be
        the judge that times next, and once shared, the worker holding it runs on beside the others and the next
        timing pauses it (a first version resumed only when the worker ended: the next judge, still locked, and that
        worker, locked by it, waited for each other, and a class on an H200 hung, 2026-11-27 13:00-13:12 UTC)."""
        paused, watch = held.paused, held.watch
        held.paused, held.watch = [], None
        if watch is not None:
            watch[0].set()
            watch[1].join()
        self._resume(paused)

    def _resume(self, paused: list) -> None:
        for h, p, _ in paused:
            p.resume()
            with self._cv:
                self._end_pause_of(h.pid)

    def _end_pause_of(self, pid: int) -> None:
        """Count the pause of process ``pid`` that is going on (if one is: a process that ended while paused has had
        its record read already) in its seconds and spans. Under the lock."""
        began = self._paused_at.pop(pid, None)
        if began is not None:
            self._paused_s[pid] = self._paused_s.get(pid, 0.0) + time.monotonic() - began[0]
            self._pause_spans.setdefault(pid, []).append([round(began[1], 3), round(time.time(), 3)])

    def started(self, held: "Held", pid: int) -> None:
        """The process of an untimed hold has started as ``pid``: from now on a timed hold pauses it rather than
        waiting for it to end."""
        with self._cv:
            held.pid = pid
            self._cv.notify_all()

    def close(self) -> None:
        """Stop the helper that pauses processes (grading/classroom/pause.py), if one runs."""
        if self.pauser is not None:
            self.pauser.driver.close()

    def pause_spans(self, pid: int) -> list:
        """When process ``pid`` was paused, [[start, end]] in wall-clock seconds (forgotten once read)."""
        with self._cv:
            self._end_pause_of(pid)  # it ended while paused (a locked process's CPU runs on, to its exit)
            self._paused_s.pop(pid, None)
            return self._pause_spans.pop(pid, [])

    def paused_seconds(self, pid: int) -> float:
        """Seconds process ``pid`` has spent paused so far (its budgets leave them out)."""
        with self._cv:
            began = self._paused_at.get(pid)
            return self._paused_s.get(pid, 0.0) + (time.monotonic() - began[0] if began is not None else 0.0)

    def share(self, held: "Held") -> bool:
        """Trade a hold of the GPU alone for a shared one, with no moment between in which another timed process
        could start while this one still runs (a speed problem's worker once its autotuning is timed). Returns
        whether it did: not for a hold already shared, or a job's that has its GPU alone for good (whole_gpu)."""
        if held.whole or not held.alone:
            return False
        self._end_pause(held)  # those it paused go on first: it still has the GPU alone until the swap below
        with self._cv:
            self._alone[held.gpu] = False
            held.alone = False
            self._holders[held.gpu].add(held)
            self._cv.notify_all()
        return True

    @contextlib.contextmanager
    def own_gpu_work(self, stop: threading.Event | None = None):
        """For the block, the grading process's own GPU work for the calling thread's job (a speed problem's inputs,
        its re-check of sampled outputs against the reference, the physical floor) runs on that job's GPU ("cuda"
        means it: this process's device ``gpu()``, as its list of visible GPUs is the slots') and as an untimed
        user of it, so never beside a timing there. Before, it ran on the process's first GPU whatever the job's,
        and beside whatever judge timed next: up to 0.6 s of fp32 attention references after each of lesson 04's
        timings, while the next judge, given the GPU as the last one ended, timed. It goes ahead of timed holds that
        wait (one such block per speed problem, shorter than a timing): behind them, a class's speed problems held
        their job's place in the queue until every timing was done, and lessons 02 and 04 took 8-18 % longer."""
        import torch
        with self.hold(False, stop, before_waiting=True):
            if torch.cuda.is_available() and self.gpu() < torch.cuda.device_count():
                with torch.cuda.device(self.gpu()):
                    yield
            else:
                yield

    def process(self, alone: bool, stop: threading.Event | None = None):
        """Hold the job's GPU for one process, shared or ``alone`` (``held_for_one_process``)."""
        return held_for_one_process(self, alone, stop)

    def grader(self, grade, stop: threading.Event | None = None):
        """``grade`` (harness.grade_problem's signature and return) as one job on the GPU with the fewest jobs: the
        grade hook of harness.grade_stored. A grading that ran out of GPU memory or died while another job was on
        its GPU (grade_again_alone) is graded once more with every process holding the GPU alone; its record says
        so (``regraded_alone``)."""
        def hook(*args):
            with self.place(timed=getattr(args[0], "kind", None) == "speed") as g:
                with self._cv:
                    placed, beside = self._placed[g], self._jobs[g] > 1
                first = grade(*args)
                with self._cv:  # another job on this GPU when it started, or one placed there since
                    shared = beside or self._placed[g] != placed

                def alone():
                    with self.whole_gpu(stop):
                        return grade(*args)
                return once_more_alone(first, shared, alone)
        return hook

    @contextlib.contextmanager
    def whole_gpu(self, stop: threading.Event | None = None):
        """Every process of the calling thread's job runs with its GPU alone, for the block (a job graded again
        after running out of GPU memory beside others)."""
        with self.hold(True, stop):
            self._local.whole = True
            try:
                yield self.gpu()
            finally:
                self._local.whole = False

    def _wait(self, stop) -> None:
        self._cv.wait(timeout=0.2)
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt("grading interrupted")


def pause_here():
    """A Pauser where a timing should pause the GPU's other processes: a GPU whose driver has the checkpoint lock
    (grading/classroom/pause.py), unless KERNELLAB_PAUSE=0. None elsewhere: on a CPU grader a timing waits for the others to
    end, as before (its timings award nothing, and stopping them would only idle cores: a CPU class test took 16 %
    longer)."""
    from kernellab.device import DEVICE
    if not (pause.enabled() and DEVICE.on_gpu):
        return None
    pauser = pause.Pauser()
    return pauser if pauser.driver.usable() else None


def ask_for_gpu_alone(job_dir: pathlib.Path, then: str) -> None:
    """A grading process's side of the hand-off (the parent's is harness._watch): report the "alone" phase, wait
    for the parent's "go", written once this process has its GPU alone (at once where no class queue runs), then
    report the phase ``then``. A judge calls it before it times, a speed problem's worker before it autotunes."""
    _hand_off(job_dir, "alone", "go", then)


def ask_to_share(job_dir: pathlib.Path, then: str) -> None:
    """The way back: report the "shared" phase and wait for the parent's "go-shared", written once this process's
    hold is a shared one again, then report ``then``. A speed problem's worker calls it once its autotuning has
    been timed: its recorded call at the timed size times nothing and need not keep the GPU from other work."""
    _hand_off(job_dir, "shared", "go-shared", then)


def _hand_off(job_dir: pathlib.Path, ask: str, answer: str, then: str) -> None:
    (job_dir / "phase").write_text(ask)
    while not (job_dir / answer).exists():
        time.sleep(0.01)
    (job_dir / "phase").write_text(then)


@contextlib.contextmanager
def held_for_one_process(slots, alone: bool, stop: threading.Event | None = None):
    """Hold ``slots``' GPU (its ``hold``) for one process, shared or ``alone``; the yielded holder's ``go_alone()``
    trades a shared hold for the GPU alone (a judge that started beside other work and is about to time), its
    ``waited`` says how long the holds took to get and its ``spans`` when they were had."""
    holder = _Holder(slots, stop)
    holder.take(alone)
    try:
        yield holder
    finally:
        holder.release()


class Held:
    """One hold of a GPU (what ``hold`` yields): which GPU, whether alone now (``share`` ends that), and whether
    the job holds it alone for good (``whole_gpu``)."""

    def __init__(self, gpu, alone: bool, whole: bool = False):
        self.gpu, self.alone, self.whole = gpu, alone, whole
        self.pid = None  # the holding process, once started (GpuSlots.started)
        self.paused, self.watch = [], None  # a timed hold's: what it paused, and the watch over their trees


class _Holder:
    """One process's hold on its job's GPU (GpuSlots.process). ``spans``: when each hold
    was had, [start, end, alone] in wall-clock seconds (what a run's records show of who shared a GPU)."""

    def __init__(self, slots, stop):
        self.slots, self.stop, self.waited, self._hold, self._held, self.spans = slots, stop, 0.0, None, None, []
        self.pid = None

    def take(self, alone: bool) -> None:
        t = time.monotonic()
        hold = self.slots.hold(alone, self.stop)
        self._held = hold.__enter__()
        self._hold = hold
        if self.pid is not None:
            self.slots.started(self._held, self.pid)
        self.waited += time.monotonic() - t
        self.spans.append([time.time(), None, alone])

    def started(self, pid: int) -> None:
        """The process has started as ``pid`` (the slots may pause it now instead of waiting for it)."""
        self.pid = pid
        if self._held is not None and not self._held.whole:
            self.slots.started(self._held, pid)

    def paused_s(self) -> float:
        """Seconds the process has spent paused for others' timings so far."""
        return self.slots.paused_seconds(self.pid) if self.pid is not None else 0.0

    def pause_spans(self) -> list:
        """When the process was paused, [[start, end]] wall-clock (once it has ended: GpuSlots.pause_spans)."""
        return self.slots.pause_spans(self.pid) if self.pid is not None else []

    def release(self) -> None:
        hold, self._hold = self._hold, None
        if hold is not None:
            self.spans[-1][1] = time.time()
            hold.__exit__(None, None, None)

    def go_alone(self) -> None:
        self.release()
        self.take(True)

    def go_shared(self) -> None:
        """Back to sharing the GPU after holding it alone (the hand-off ``ask_to_share``): untimed work may start
        beside this process again."""
        now = time.time()  # its alone time ends as it asks: those it paused go on from here (GpuSlots.share)
        if self._hold is None or not self.slots.share(self._held):
            return
        self.spans[-1][1] = now
        self.spans.append([now, None, False])


def out_of_memory(message: str) -> bool:
    """A grading that ran out of GPU memory (a CUDA allocation failed, in the learner's code or the grader's)."""
    m = str(message).lower()
    return "out of memory" in m or "outofmemoryerror" in m


def once_more_alone(first: tuple, shared: bool, alone) -> tuple:
    """(outcome, record) of a grading, or, when it shared its GPU and should be graded again alone (it failed in a
    way others can cause, ``grade_again_alone``, or timed short of memory, ``timed_short_of_memory``), ``alone()``'s,
    its record marked ``regraded_alone``. The queue's rule and Ray's."""
    outcome, record = first
    if not (shared and (grade_again_alone(outcome.message) or timed_short_of_memory(record))):
        return first
    outcome, record = alone()
    record["regraded_alone"] = True
    return outcome, record


def timed_short_of_memory(record: dict) -> bool:
    """Its timed runs (the learner's replay, or the baseline) had allocations fail until the allocator freed its
    cache and tried again: too little GPU memory beside other gradings' processes, a cost the learner's own GPU
    would not charge (each retry frees and allocates again, synchronising the device)."""
    return bool(record.get("alloc_retries") or record.get("baseline_alloc_retries"))


def grade_again_alone(message: str) -> bool:
    """A grading beside others to do once more with its GPU alone: it ran out of GPU memory, or one of its
    processes died (an allocation failing where nothing catches it, as at CUDA's start, kills the process). Others'
    memory must not cost a submission its points; a submission that really crashes crashes again, alone."""
    from kernellab.grading.judge.harness import failed
    return out_of_memory(message) or failed(message)
