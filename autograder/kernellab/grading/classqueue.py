"""Grading a class: every (student, problem) of a lesson graded into the result store by a pool of jobs.

``kernellab term autograde LESSON --jobs N`` runs this first, then ``nbgrader autograde`` one student at a
time, which then only reads the store (nbgrader's gradebook has one writer, so it cannot run in parallel).

One job is one problem of one submission, graded by ``harness.grade_stored`` (its own worker and judge
processes, so threads are enough here). Untimed problems (every kind but "speed") run up to N at a time;
speed problems run after them, one at a time, with nothing else running (a timed problem must be alone on
its GPU). Each result is stored as soon as it is graded; a result already stored is reused (unless
``force``), so a run stopped by Ctrl-C resumes where it stopped.
"""
from __future__ import annotations

import collections
import os
import pathlib
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from . import harness
from .store import STORE_DIR, Store, notebook_hash


def default_jobs() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


def _submissions(course: pathlib.Path, lesson: str) -> dict:
    root = pathlib.Path(course) / "submitted"
    return {p.parent.parent.name: p for p in sorted(root.glob(f"*/{lesson}/{lesson}.ipynb"))}


def grade_class(course, lesson: str, jobs: int | None = None, force: bool = False, progress: bool = True,
                store: Store | None = None, after_job=None, logs_dir=None) -> dict:
    """Grade every submission of ``lesson`` in ``course`` (the nbgrader course folder, ``autograder/``) into
    the store. ``after_job(done_count, job)`` is called in this thread after each job (a test's hook).
    Returns a summary: students, jobs, graded, reused, failed, unreadable, seconds, interrupted, results
    {student: {problem: (points, max, message)}}. A KeyboardInterrupt (Ctrl-C, or raised by ``after_job``)
    stops the pool: running gradings are killed, nothing more starts, and the summary says interrupted."""
    from ..ceilings import measure_ceilings
    from ..lessons import problems_of
    from ..learner import facts as device_facts
    from ..notebook_cells import read_notebook
    from .secret import course_secret

    course = pathlib.Path(course)
    jobs = max(1, int(jobs or default_jobs()))
    store = store or Store(course / STORE_DIR)
    logs_dir = course / "grading_logs" if logs_dir is None else logs_dir
    secret = course_secret(course)
    problems = problems_of(lesson)
    t0 = time.monotonic()
    summary = {"lesson": lesson, "students": 0, "jobs": 0, "graded": 0, "reused": 0, "failed": 0,
               "failures": [], "unreadable": [], "interrupted": False, "results": {}, "jobs_n": jobs}
    untimed, timed = collections.deque(), collections.deque()
    for student, path in _submissions(course, lesson).items():
        summary["students"] += 1
        try:
            nb = read_notebook(path)
        except Exception as exc:  # noqa: BLE001 - nbgrader reports it when it autogrades this student
            summary["unreadable"].append(f"{student}: {type(exc).__name__}: {exc}"[:200])
            continue
        nb_hash = notebook_hash(nb)
        for p in problems.values():
            job = (student, p, nb, nb_hash)
            (timed if p.kind == "speed" else untimed).append(job)
    summary["jobs"] = len(untimed) + len(timed)
    if not summary["jobs"]:
        summary["seconds"] = round(time.monotonic() - t0, 1)
        return summary
    ceil = measure_ceilings(quiet=True)
    facts = device_facts()
    env_info = harness._versions()

    def run(job):
        student, p, nb, nb_hash = job
        return harness.grade_stored(p, nb, lesson, student, secret, ceil, facts, env_info, logs_dir, store,
                                    force, nb_hash=nb_hash)

    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=summary["jobs"], desc=f"grading {lesson} ({jobs} jobs)", file=sys.stdout, unit="problem")
    harness.resume()
    done = 0
    running = {}
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="kl-grade")
    try:
        while untimed or timed or running:
            while untimed and len(running) < jobs:
                job = untimed.popleft()
                running[pool.submit(run, job)] = job
            if not untimed and not running and timed:  # a timed problem: alone, and nothing starts beside it
                job = timed.popleft()
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
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(graded=summary["graded"], reused=summary["reused"], failed=summary["failed"])
                if after_job is not None:
                    after_job(done, job)
    except KeyboardInterrupt:
        summary["interrupted"] = True
        untimed.clear()
        timed.clear()
        harness.interrupt()  # running gradings kill their children and stop
        for fut in running:
            fut.cancel()
        wait(list(running))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        harness.resume()
        if bar is not None:
            bar.close()
    summary["seconds"] = round(time.monotonic() - t0, 1)
    return summary


def describe(summary: dict) -> str:
    """One printed paragraph: students, problems graded, reused, failed, seconds per student."""
    n = max(1, summary["students"])
    lines = [f"{summary['lesson']}: {summary['students']} students, {summary['jobs']} problems: "
             f"{summary['graded']} graded, {summary['reused']} reused from the store, {summary['failed']} failed "
             f"({summary['jobs_n']} jobs, {summary['seconds']:.1f} s, {summary['seconds'] / n:.1f} s per student)"]
    if summary["interrupted"]:
        lines.append("INTERRUPTED: what was graded is stored; run the same command again to resume.")
    lines += [f"  failed: {f}" for f in summary["failures"][:20]]
    lines += [f"  unreadable: {u}" for u in summary["unreadable"]]
    return "\n".join(lines)
