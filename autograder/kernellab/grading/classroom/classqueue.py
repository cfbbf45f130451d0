"""Grading a class: every (student, problem) of a lesson graded into the result store by a pool of jobs.

``kernellab term autograde LESSON --jobs N`` runs this first, then ``nbgrader autograde`` one student at a
time, which then only reads the store (nbgrader's gradebook has one writer, so it cannot run in parallel).

One job is one problem of one submission, graded by ``harness.grade_stored`` (its own worker and judge
processes, so threads are enough here), placed on one of the machine's GPUs (``--gpus``, default all). Up to
N jobs run at once; every process a job starts holds its GPU (grading/classroom/slots.py): workers and untimed judges
share it, a process that times has it alone, so a speed problem's worker (compiling, autotuning, recording)
runs beside other work and only its judge's timing waits for a quiet GPU. Speed problems are queued after
the others. Each process may run as many CPU threads as its share of the cores (``cores.threads_each``). Each
result is stored as soon as it is graded; a result already stored is reused (unless ``force``), so a run
stopped by Ctrl-C resumes where it stopped. With ``ray`` (an address, or "local") the
same jobs run on Ray instead, by a grader per GPU of the cluster (grading/classroom/cluster.py).
"""
from __future__ import annotations

import collections
import contextlib
import os
import pathlib
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from kernellab.grading.judge import harness
from kernellab.grading.processes import zygote
from kernellab.grading.classroom.cores import untimed_cores, usable
from kernellab.grading.judge.store import STORE_DIR, Store, notebook_hash

# GiB of GPU memory a grading job may need (a worker's or judge's CUDA context, the largest lesson's inputs).
GIB_PER_JOB = 8
# Jobs on one GPU at most, whatever its memory: one H200 (141 GB) with 30 untimed cores graded lessons 02 and 04 in
# 68.2 and 70.2 s with 16 jobs against 79.1 and 81.9 s with 12, interleaved on one machine (2026-11-27 11:14-11:20
# UTC, assets/gpu/class_grading_jobs_1114utc/); no allocation was retried and no grading was done again alone.
MAX_JOBS_PER_GPU = 16


def gpu_count() -> int:
    """GPUs this machine's grading can use (1 on a CPU: one slot)."""
    from kernellab.device import DEVICE
    if not DEVICE.on_gpu:
        return 1
    import torch
    return max(1, torch.cuda.device_count())


def default_jobs(gpus: int | None = None) -> int:
    """Jobs at a time: no more jobs per GPU than its memory holds at GIB_PER_JOB each (``jobs_per_gpu``), and no more
    than two for every three CPU cores left after those kept for timing (grading/classroom/cores.py); on a CPU, half the
    cores. The CPU is what a class's jobs run short of first: on two H200s with 32 cores (28 untimed), 18 jobs
    graded lessons 01 and 03 in 29.2 and 51.3 s, 24 jobs in 34.2 and 54.2 s, their processes slower for want of
    cores (assets/gpu/class_grading.md)."""
    from kernellab.device import DEVICE
    cores = max(2, usable())  # the cores it may run on (a taskset or cpuset), not the machine's
    if not DEVICE.on_gpu:
        return max(1, cores // 2)
    import torch
    gpus = gpus or gpu_count()
    per_gpu = jobs_per_gpu(torch.cuda.get_device_properties(0).total_memory)
    return jobs_within(per_gpu, gpus, cores, len(untimed_cores(gpus)))


def jobs_per_gpu(memory_bytes: int) -> int:
    """Jobs one GPU of ``memory_bytes`` holds at GIB_PER_JOB each, at least one and at most MAX_JOBS_PER_GPU."""
    return max(1, min(MAX_JOBS_PER_GPU, int(memory_bytes / 2**30) // GIB_PER_JOB))


def jobs_within(per_gpu: int, gpus: int, cores: int, untimed: int) -> int:
    """``default_jobs``' rule: ``per_gpu`` jobs on each of ``gpus`` GPUs, within two for every three of the
    ``untimed`` cores (at least one per GPU) and two cores short of all ``cores``."""
    return max(1, min(cores - 2, per_gpu * gpus, max(gpus, untimed * 2 // 3)))


def ray_local_init(gpus: int | None, init: dict | None = None, on_machine: int | None = None) -> dict | None:
    """``ray.init`` arguments for a local Ray cluster given ``gpus`` of this machine's GPUs (``on_machine``: how
    many it has, default counted; 0 on a CPU): Ray is told of only those, and hands its graders GPUs 0..gpus-1.
    ``init`` unchanged where every GPU is meant or there is none."""
    if on_machine is None:
        from kernellab.device import DEVICE
        on_machine = gpu_count() if DEVICE.on_gpu else 0
    if not gpus or not on_machine:
        return init
    return {"num_gpus": min(gpus, on_machine), **(init or {})}


def _submissions(course: pathlib.Path, lesson: str) -> dict:
    root = pathlib.Path(course) / "submitted"
    return {p.parent.parent.name: p for p in sorted(root.glob(f"*/{lesson}/{lesson}.ipynb"))}


def grade_class(course, lesson: str, jobs: int | None = None, force: bool = False, progress: bool = True,
                store: Store | None = None, after_job=None, logs_dir=None, gpus: int | None = None,
                ray: str | None = None, ray_init: dict | None = None, only=None) -> dict:
    """Grade every submission of ``lesson`` in ``course`` (the nbgrader course folder, ``autograder/``) into
    the store. ``gpus``: how many of this machine's GPUs (default all; a local Ray cluster is told of only those);
    ``ray``: grade on a Ray cluster instead
    ("local" starts one on this machine, "nodes" one node per GPU of it, each with its share of the cores; ``ray_init``:
    extra ``ray.init`` arguments); ``only``: these problem
    ids. ``after_job(done_count, job)`` is called in this thread after each job (a test's hook).
    Returns a summary: mode, students, jobs, graded, reused, failed, failures, unreadable, seconds,
    per_student_s, gpus, gpu_util_mean, gpu_util_per_gpu, gpu_busy_series, gpu_of_slot (queue), grader_cpu_s,
    regraded_alone, interrupted, results {student:
    {problem: (points, max, message)}}. A KeyboardInterrupt (Ctrl-C, or raised by ``after_job``) stops the pool: running gradings are
    killed, nothing more starts, and the summary says interrupted."""
    from kernellab.ceilings import measure_ceilings
    from kernellab.lessons import problems_of
    from kernellab.learner import facts as device_facts
    from kernellab.notebook_source import read_notebook
    from kernellab.grading.classroom.gpu_usage import GpuUsage
    from kernellab.grading.judge.secret import course_secret
    from kernellab.grading.classroom.slots import GpuSlots

    course = pathlib.Path(course)
    store = store or Store(course / STORE_DIR)
    logs_dir = course / "grading_logs" if logs_dir is None else logs_dir
    secret = course_secret(course)
    problems = [p for p in problems_of(lesson).values() if not only or p.id in only]
    t0 = time.monotonic()
    summary = {"lesson": lesson, "mode": "ray" if ray else "queue", "students": 0, "jobs": 0, "graded": 0,
               "reused": 0, "failed": 0, "failures": [], "unreadable": [], "interrupted": False, "results": {},
               "gpus": 0, "gpu_util_mean": None, "gpu_util_per_gpu": {}, "regraded_alone": []}
    untimed, timed = collections.deque(), collections.deque()
    for student, path in _submissions(course, lesson).items():
        summary["students"] += 1
        try:
            nb = read_notebook(path)
        except Exception as exc:  # noqa: BLE001 - nbgrader reports it when it autogrades this student
            summary["unreadable"].append(f"{student}: {type(exc).__name__}: {exc}"[:200])
            continue
        nb_hash = notebook_hash(nb)
        for p in problems:
            (timed if p.kind == "speed" else untimed).append((student, p, nb, nb_hash))
    queue = untimed + timed
    summary["jobs"] = len(queue)
    left = collections.Counter(job[0] for job in queue)  # jobs not yet done, per student
    if not queue:
        summary.update(seconds=round(time.monotonic() - t0, 1), jobs_n=jobs or 0, per_student_s=0.0)
        return summary
    ceil = measure_ceilings(quiet=True)
    facts = device_facts()
    env_info = harness._versions()

    cluster = slots = None
    if ray:
        from kernellab.grading.classroom.cluster import RayGrader
        if ray == "local":
            ray_init = ray_local_init(gpus, ray_init)
            jobs = jobs or default_jobs((ray_init or {}).get("num_gpus"))
        elif ray == "nodes":  # a node per GPU (KERNELLAB_RAY_NODES of them on a CPU), each with its share of cores
            from kernellab.device import DEVICE
            n = min(gpus or gpu_count(), gpu_count()) if DEVICE.on_gpu else int(os.environ.get("KERNELLAB_RAY_NODES", 2))
            ray_init = {"nodes": n, "gpus": DEVICE.on_gpu, **(ray_init or {})}
            jobs = jobs or default_jobs(n if DEVICE.on_gpu else None)
        cluster = RayGrader(ray, jobs, ray_init)
        jobs, summary["gpus"], summary["backend"] = cluster.jobs, cluster.gpus, cluster.describe()
    else:
        n_gpus = min(gpu_count(), gpus) if gpus else gpu_count()
        jobs = max(1, int(jobs or default_jobs(n_gpus)))
        slots = GpuSlots(n_gpus, jobs=jobs)
        summary["gpus"] = n_gpus if harness.DEVICE.on_gpu else 0
    summary["jobs_n"] = jobs

    # Either way a grading that ran out of memory or died beside others is graded once more alone, in the hook.
    grade_one = cluster.grade if cluster is not None else \
        slots.grader(lambda *a: harness.grade_problem(*a), harness._STOP)

    ray_paused = [0]  # processes paused for timings on the Ray graders, from the records they send back

    def run(job):
        student, p, nb, nb_hash = job

        def grade(*args):
            outcome, record = grade_one(*args)
            if record.get("regraded_alone"):
                summary["regraded_alone"].append(f"{student}/{p.id}")
            if cluster is not None:  # a Ray grader pauses for its own timings: its records say how often
                ray_paused[0] += sum(len(spans or []) for spans in harness.each_process(record, "paused"))
            return outcome, record
        return harness.grade_stored(p, nb, lesson, student, secret, ceil, facts, env_info, logs_dir, store, force,
                                    nb_hash=nb_hash, grade=grade)

    bar = None
    if progress:
        from tqdm.auto import tqdm
        where = cluster.describe() if cluster else f"{jobs} jobs, {summary['gpus'] or 'no'} GPU"
        bar = tqdm(total=summary["jobs"], desc=f"grading {lesson} ({where})", file=sys.stdout, unit="problem")
    harness.resume()
    cpu0 = _own_cpu_s()
    done = 0
    running = {}
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="kl-grade")
    # Only the GPUs this run was given, so a run on one GPU of two is not averaged with the idle other: the queue's,
    # or a local Ray cluster's (its graders have GPUs 0..N-1); another machine's cluster: this machine's, as before.
    if slots is not None:
        sampled = slots.visible[:slots.n]
    else:
        sampled = [str(g) for g in range(cluster.gpus)] if ray in ("local", "nodes") and cluster.gpus else None
    usage = GpuUsage(gpus=sampled if harness.DEVICE.on_gpu else None)
    try:
        with usage, harness.use_slots(slots) if slots is not None else contextlib.nullcontext(), \
                slots.grading_threads() if slots is not None else contextlib.nullcontext():
            while queue or running:
                while queue and len(running) < jobs:
                    job = queue.popleft()
                    running[pool.submit(run, job)] = job
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in finished:
                    job = running.pop(fut)
                    student, p = job[0], job[1]
                    try:
                        (score, points, message), reused = fut.result()
                    except Exception as exc:  # noqa: BLE001 - grade_stored catches grading errors; this is a bug
                        score, points, message, reused = 0.0, float(p.points), f"Grading this problem failed: {exc}", False
                    summary["results"].setdefault(student, {})[p.id] = (score, points, message)
                    summary["reused" if reused else "graded"] += 1
                    if harness.failed(message):
                        summary["failed"] += 1
                        summary["failures"].append(f"{student}/{p.id}: {message[:160]}")
                    done += 1
                    left[student] -= 1
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(students=f"{sum(1 for v in left.values() if v == 0)}/{len(left)}",
                                        graded=summary["graded"], reused=summary["reused"], failed=summary["failed"])
                    if after_job is not None:
                        after_job(done, job)
    except KeyboardInterrupt:
        summary["interrupted"] = True
        queue.clear()
        harness.interrupt()  # running gradings kill their children (or the Ray graders) and stop
        for fut in running:
            fut.cancel()
        wait(list(running))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        zygote.stop_all()  # the warm processes jobs were forked from: nothing of the run stays
        if slots is not None:
            slots.close()  # and the helper that paused processes for timings
        harness.resume()
        if cluster is not None:
            cluster.close()
        if bar is not None:
            bar.close()
    summary["seconds"] = round(time.monotonic() - t0, 1)
    summary["per_student_s"] = round(summary["seconds"] / max(1, summary["students"]), 2)
    summary["gpu_util_mean"], summary["gpu_util_per_gpu"] = usage.mean(), usage.per_gpu()
    # Each busy sample in time, and which sampled GPU each slot of the records is (the queue's slots are its own
    # numbering; Ray's records name the GPU itself): to say how busy a GPU was while held alone, shared or idle.
    summary["gpu_busy_series"] = usage.series()
    if slots is not None:
        summary["gpu_of_slot"] = {str(g): slots.visible[g] for g in range(slots.n)}
        # Untimed processes paused for timings, and timings that waited for one to become pausable (grading/classroom/pause.py)
        summary["paused"], summary["waited_for"] = slots.pauses
    else:  # the graders' own slots paused; how many timings waited stays on their machines
        summary["paused"], summary["waited_for"] = ray_paused[0], None
    # CPU seconds of this process (its job threads: cases, references, judging; not the grading processes): near
    # the run's seconds, one core's worth, it is what the jobs wait on (Python runs one thread at a time).
    summary["grader_cpu_s"] = round(_own_cpu_s() - cpu0, 1)
    return summary


def _own_cpu_s() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def describe(summary: dict) -> str:
    """The screen at the end: students and problems graded, reused and failed (and why), time per student, GPU use."""
    util, per_gpu = summary.get("gpu_util_mean"), summary.get("gpu_util_per_gpu") or {}
    lines = [f"{summary['lesson']}: {summary['students']} students, {summary['jobs']} problems: "
             f"{summary['graded']} graded, {summary['reused']} reused from the store, {summary['failed']} failed "
             f"({summary.get('backend') or str(summary.get('jobs_n', 0)) + ' jobs'}, {summary['seconds']:.1f} s, "
             f"{summary['per_student_s']:.1f} s per student"
             + (f", GPU busy {util:.0f}% on average over {summary['gpus']} GPU(s)" if util is not None else "")
             + (" (" + ", ".join(f"GPU {g}: {u:.0f}%" for g, u in per_gpu.items()) + ")" if len(per_gpu) > 1 else "")
             + ")"]
    if summary["interrupted"]:
        lines.append("INTERRUPTED: what was graded is stored; run the same command again to resume.")
    if summary.get("regraded_alone"):
        lines.append(f"  graded again with the GPU alone after running out of memory (or dying) beside others: "
                     f"{', '.join(summary['regraded_alone'][:10])}")
    lines += [f"  failed: {f}" for f in summary["failures"][:20]]
    if len(summary["failures"]) > 20:
        lines.append(f"  ... and {len(summary['failures']) - 20} more failures (grading_logs/ has each one's record)")
    lines += [f"  unreadable: {u}" for u in summary["unreadable"]]
    return "\n".join(lines)
