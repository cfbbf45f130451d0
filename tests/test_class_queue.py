"""Class-scale grading (issue 24): the result store, the queue of (student, problem) jobs, and nbgrader
reading the store. A synthetic class of lesson 01: the solution, the blank release, a known-wrong add and a
submission whose graded function exits its process. Graded serially (grade_notebook, no store) and by the
queue (2 jobs, into a store, interrupted once and resumed): every score must be the same, a second queue run
grades nothing, and ``kernellab term autograde`` with grading forbidden (KERNELLAB_STORE_ONLY=1) fills the
gradebook with the serial scores from the store alone."""
import threading
import time

import pytest

from kernellab.grading import classqueue, harness
from kernellab.grading import submissions as S
from kernellab.grading.secret import course_secret
from kernellab.grading.store import Store, notebook_hash, secret_fingerprint
from kernellab.lessons import problems_of
from roundtrip_checks import new_course

L = "01_roofline_vector_add"
TIMES = {}


def _count_gradings(monkeypatch) -> list:
    calls = []
    real = harness.grade_problem

    def counted(problem, *a, **k):
        calls.append(problem.id)
        return real(problem, *a, **k)
    monkeypatch.setattr(harness, "grade_problem", counted)
    return calls


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    course, rel, src, wrong = new_course(tmp_path_factory, L)
    subs = {"solution": S.filled(rel, src), "blank": rel, "nomask": S.filled(rel, src, wrong["nomask"]),
            "crasher": S.filled(rel, src, wrong["exit_in_fused"])}
    for student, nb in subs.items():
        course.submit(L, student, nb)
    secret = course_secret(course.ag)
    t0 = time.monotonic()
    serial = {s: harness.grade_notebook(S.read(course.ag / "submitted" / s / L / f"{L}.ipynb"), L, s, secret,
                                        progress=False) for s in subs}
    TIMES["serial"] = time.monotonic() - t0
    return course, subs, serial


@pytest.fixture(scope="module")
def queued(klass):
    """The queue, 2 jobs: stopped (KeyboardInterrupt) after 5 jobs, then run again to the end."""
    course, subs, _ = klass
    mp = pytest.MonkeyPatch()
    calls = _count_gradings(mp)
    stop_after = 5

    def hook(done, job):
        if done == stop_after:
            raise KeyboardInterrupt
    t0 = time.monotonic()
    first = classqueue.grade_class(course.ag, L, jobs=2, progress=False, after_job=hook)
    stored_after_stop = len(Store(course.ag / "grading_store").entries(L))
    calls_first = len(calls)
    second = classqueue.grade_class(course.ag, L, jobs=2, progress=False)
    TIMES["queue"] = time.monotonic() - t0
    mp.undo()
    return first, second, stored_after_stop, calls_first, len(calls) - calls_first


def test_interrupted_queue_stops_and_resumes_without_regrading_what_is_stored(klass, queued):
    _, subs, _ = klass
    first, second, stored_after_stop, _, calls_second = queued
    n_jobs = len(subs) * len(problems_of(L))
    assert first["interrupted"] and stored_after_stop >= 5
    assert first["graded"] + first["reused"] < n_jobs  # nothing started after the stop
    assert not second["interrupted"]
    assert second["reused"] == stored_after_stop
    assert second["graded"] == calls_second == n_jobs - stored_after_stop
    print(f"\nserial {TIMES['serial']:.1f} s, queue (2 jobs, stopped and resumed) {TIMES['queue']:.1f} s")


def test_queue_scores_equal_serial_scores(klass, queued):
    _, subs, serial = klass
    _, second, *_ = queued
    for student in subs:
        got = {gid: r[0] for gid, r in second["results"][student].items()}
        assert got == {gid: r[0] for gid, r in serial[student].items()}, student
    assert serial["solution"]["add_correct"][0] == serial["solution"]["add_correct"][1] > 0
    assert serial["nomask"]["add_correct"][0] == 0
    assert serial["crasher"]["fused_correct"][0] == 0
    assert all(r[0] == 0 for r in serial["blank"].values())


def test_second_queue_run_reuses_everything(klass, queued, monkeypatch):
    course, subs, serial = klass
    calls = _count_gradings(monkeypatch)
    again = classqueue.grade_class(course.ag, L, jobs=2, progress=False)
    assert calls == [] and again["graded"] == 0 and again["reused"] == len(subs) * len(problems_of(L))
    assert again["failed"] == serial_failures(serial)
    assert "0 graded" in classqueue.describe(again)


def serial_failures(serial) -> int:
    return sum(harness.failed(r[2]) for res in serial.values() for r in res.values())


def test_store_keys_ignore_outputs_and_never_hold_the_secret(klass, queued):
    course, subs, _ = klass
    nb = S.read(course.ag / "submitted" / "solution" / L / f"{L}.ipynb")
    h = notebook_hash(nb)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [{"output_type": "stream", "name": "stdout", "text": "x"}], 7
            c.metadata["collapsed"] = True
    assert notebook_hash(nb) == h
    next(c for c in nb.cells if c.cell_type == "code").source += "\n# edited"
    assert notebook_hash(nb) != h
    secret = course_secret(course.ag)
    text = "".join(p.read_text() for p in (course.ag / "grading_store").rglob("*.json"))
    assert secret.decode() not in text and secret_fingerprint(secret) in text
    assert not list((course.ag / "grading_store").rglob(".tmp-*"))
    # Results graded by other grading code are not reused: the code's hash is part of every key.
    from kernellab.grading import store as store_module
    key = store_module.Store.key(L, "solution", h, "fp", "add_correct")
    assert key["grader"] == store_module.grader_version() and len(key["grader"]) == 16


def test_term_autograde_fills_the_gradebook_from_the_store_alone(klass, queued, monkeypatch):
    """``kernellab term autograde --jobs 2`` after the queue: its queue reuses everything and nbgrader
    autograde grades nothing (any grading outside the store fails under KERNELLAB_STORE_ONLY=1), yet the
    gradebook holds exactly the serial scores."""
    course, subs, serial = klass
    monkeypatch.setenv(harness.STORE_ONLY_ENV, "1")
    t0 = time.monotonic()
    r = course.term("autograde", L, "--jobs", "2")
    TIMES["term"] = time.monotonic() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"{len(subs)} students, {len(subs) * len(problems_of(L))} problems: 0 graded" in r.stdout, r.stdout
    for student in subs:
        book = course.cell_scores(L, student)
        assert {gid: book.get(gid) for gid in serial[student]} == {gid: v[0] for gid, v in serial[student].items()}, student
    assert "reused_from_store" in course.result(L, "solution", "add_correct")
    print(f"\nterm autograde from the store: {TIMES['term']:.1f} s for {len(subs)} students")


def test_speed_problems_run_alone_and_untimed_ones_side_by_side(tmp_path, monkeypatch):
    """The scheduling rule, with a stand-in for the grading: at most N untimed jobs at once, and a speed job
    with nothing beside it."""
    sub = tmp_path / "submitted"
    rel = S.read(__import__("kernellab.paths", fromlist=["repo_root"]).repo_root() / "notebooks" / L / f"{L}.ipynb")
    for s in ("a", "b", "c"):
        (sub / s / L).mkdir(parents=True)
        S.write(rel, sub / s / L / f"{L}.ipynb")
    lock, active, seen = threading.Lock(), [0], []

    def fake(p, nb, lesson, student, *a, **k):
        with lock:
            active[0] += 1
            seen.append((p.kind, active[0]))
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return (0.0, 1.0, "stand-in"), False
    monkeypatch.setattr(harness, "grade_stored", fake)
    out = classqueue.grade_class(tmp_path, L, jobs=3, progress=False)
    assert out["graded"] == 3 * len(problems_of(L))
    assert all(n == 1 for kind, n in seen if kind == "speed") and any(k == "speed" for k, _ in seen)
    assert max(n for _, n in seen) == 3
