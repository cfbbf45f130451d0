"""Class-scale grading (issue 24): the result store, the queue of (student, problem) jobs, the GPU slots, Ray,
and nbgrader reading the store.

A synthetic class of twelve lesson 01 submissions (the solution, an honest autotuned variant, the blank release,
a known-wrong add, cheats from the corpus, one whose graded function exits its process, one that never returns)
is graded on ``add_correct`` and ``add_bandwidth`` three ways: serially (grade_notebook, no store), by the queue
(4 jobs, into a store, stopped once and resumed) and by a local Ray cluster started and stopped here (4 jobs,
two fake GPUs; stopped once and resumed too). Every score must be the same, a stopped run must leave no grading
process (and no Ray process) behind, and a resumed run must grade only what was not stored. A second, smaller
class goes through ``kernellab term autograde`` with grading forbidden (KERNELLAB_STORE_ONLY=1): the gradebook
must hold the serial scores, read from the store alone."""
import contextlib
import json
import os
import pathlib
import threading
import time
import types

import pytest

from kernellab.grading.classroom import classqueue
from kernellab.grading.judge import harness
from kernellab.grading.instructor import term
from kernellab.grading import corpus as C
from kernellab.grading.instructor import submissions as S
from kernellab.grading.judge.secret import course_secret
from kernellab.grading.classroom.slots import GpuSlots
from kernellab.grading.judge.store import Store, notebook_hash, secret_fingerprint
from kernellab.lessons import problems_of
from kernellab.paths import package_root
from roundtrip_checks import new_course

ROOT = pathlib.Path(__file__).resolve().parents[1]

L = "01_roofline_vector_add"
ONLY = ("add_correct", "add_bandwidth")
TIMES = {}
CHEATS = ("torch_add", "torch_op_and_a_token_launch", "numpy_views_add", "forge_the_result_file", "patch_checkers",
          "cache_on_shape")
_EXIT = "def add(x, y):\n    exit(3)\n"
_HANG = "def add(x, y):\n    while x.numel() > 0:\n        pass\n"


def _count_gradings(monkeypatch) -> list:
    calls = []
    real = harness.grade_problem

    def counted(problem, *a, **k):
        calls.append(problem.id)
        return real(problem, *a, **k)
    monkeypatch.setattr(harness, "grade_problem", counted)
    return calls


def _grading_processes(ray_too: bool = True) -> list[str]:
    """Command lines of live grading processes (workers, judges, zygotes and their forks) started by this process or
    by a Ray worker and, ``ray_too``, Ray processes of this machine. Another test process's (pytest-xdist) are not
    ours: a grading process names its grader's pid on its command line (a fork keeps its zygote's)."""
    live = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            live[pid] = cmd if state in "RS" else f"[{state}] {cmd}"  # D: a killed process stuck in the kernel
    ray = {pid for pid, cmd in live.items() if any(k in cmd for k in ("raylet", "gcs_server", "default_worker.py"))}
    graders = {str(os.getpid())} | ray
    found = [live[pid][:160] for pid in ray] if ray_too else []
    for cmd in live.values():
        if any(k in cmd for k in ("kernellab.grading.worker.child", "kernellab.grading.judge.judge", "kernellab/grading/processes/zygote.py")) \
                and graders & set(cmd.split()):
            found.append(cmd[:160])
    return found


def _no_process_left(timeout: float = 20.0, ray_too: bool = True) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := _grading_processes(ray_too)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _grading_temp(root: pathlib.Path) -> set:
    """What grading processes make in the temporary folder ``root`` for their life: their Triton caches, the
    zygotes' logs."""
    return {p.name for pattern in ("kl-triton-*", "kl-zygote-*") for p in root.glob(pattern)}


@pytest.fixture(scope="module")
def short_budgets():
    mp = pytest.MonkeyPatch()
    # The one that never returns hangs in its first call (the compile phase): it costs 15 s, not 2 minutes.
    mp.setattr(harness, "COMPILE_BUDGET", 15.0)
    mp.setattr(harness, "RUN_BUDGET", 8.0)
    yield
    mp.undo()


@pytest.fixture(scope="module")
def klass(tmp_path_factory, short_budgets):
    course, rel, src, wrong = new_course(tmp_path_factory, L)
    text = S.solution_texts(src)
    subs = {"solution": S.filled(rel, src), "blank": rel, "nomask": S.filled(rel, src, wrong["nomask"]),
            "exits": S.filled(rel, src, {"add_code": text["add_code"].replace("def add(x, y):\n", _EXIT)}),
            "hangs": S.filled(rel, src, {"add_code": text["add_code"].replace("def add(x, y):\n", _HANG)}),
            "autotuned": C.notebook_of(C.by_name("stock_autotuned_add"))}
    subs |= {name: C.notebook_of(C.by_name(name)) for name in CHEATS}
    assert len(subs) >= 12
    for student, nb in subs.items():
        course.submit(L, student, nb)
    secret = course_secret(course.ag)
    t0 = time.monotonic()
    serial = {s: harness.grade_notebook(S.read(course.ag / "submitted" / s / L / f"{L}.ipynb"), L, s, secret,
                                        progress=False, only=ONLY) for s in subs}
    TIMES["serial"] = time.monotonic() - t0
    return course, subs, serial


def _stopped_then_resumed(course, stop_after: int, **kw):
    """grade_class stopped (KeyboardInterrupt from its hook) after ``stop_after`` jobs, the processes left
    then, what was stored, and the run to the end after it (counting the gradings each run did)."""
    mp = pytest.MonkeyPatch()
    calls = _count_gradings(mp)

    def hook(done, job):
        if done == stop_after:
            raise KeyboardInterrupt
    store = kw.pop("store", None) or Store(course.ag / "grading_store")
    t0 = time.monotonic()
    first = classqueue.grade_class(course.ag, L, progress=False, after_job=hook, only=ONLY, store=store, **kw)
    left = _no_process_left(ray_too=False)
    stored = len(store.entries(L))
    calls_first = len(calls)
    second = classqueue.grade_class(course.ag, L, progress=False, only=ONLY, store=store, **kw)
    seconds = time.monotonic() - t0
    mp.undo()
    return {"first": first, "second": second, "left": left, "stored": stored, "calls_first": calls_first,
            "calls_second": len(calls) - calls_first, "seconds": seconds}


@pytest.fixture(scope="module")
def queued(klass):
    course, _, _ = klass
    run = _stopped_then_resumed(course, 5, jobs=4)
    TIMES["queue"] = run["seconds"]
    return run


@pytest.fixture(scope="module")
def rayed(klass, tmp_path_factory):
    """The same class on a local Ray cluster of this machine, with two fake GPUs (a grader each). The cluster is
    started once here (grade_class then joins it, and leaves it up), stopped at the end."""
    ray = pytest.importorskip("ray")
    from kernellab.grading.classroom.cluster import RayGrader, connect
    course, _, _ = klass
    tmp = tmp_path_factory.mktemp("ray")
    # The cluster's processes get a temporary folder of their own (short: Ray keeps its sockets there), so what
    # they leave is theirs, not a test's running beside this one.
    import shutil
    import tempfile
    temp = pathlib.Path(tempfile.mkdtemp(prefix="klr-"))
    mp = pytest.MonkeyPatch()
    mp.setenv("TMPDIR", str(temp))
    path_before = os.environ.get("PYTHONPATH")
    assert connect("local", 4, {"num_gpus": 2})
    driver_path_kept = os.environ.get("PYTHONPATH") == path_before
    try:
        run = _stopped_then_resumed(course, 3, jobs=4, ray="local", store=Store(tmp / "store"), logs_dir=tmp / "logs")
        grader = RayGrader("local", jobs=4)
        run["options"] = grader._options
        run["grader_started_a_cluster"] = grader.started
        run["graders"] = ray.get([g.where.remote() for g in grader.graders])
        run["driver_path_kept"] = driver_path_kept
        grader.close()
    finally:
        ray.shutdown()
        mp.undo()
    run["left_after_shutdown"] = _no_process_left()
    run["temp_left"], run["temp"] = sorted(_grading_temp(temp)), temp
    shutil.rmtree(temp, ignore_errors=True)
    run["logs"] = tmp / "logs"
    TIMES["ray"] = run["seconds"]
    return run


def _scores(results: dict) -> dict:
    return {s: {gid: r[0] for gid, r in res.items()} for s, res in results.items()}


def test_serial_grading_of_the_class_is_what_each_submission_earns(klass):
    _, subs, serial = klass
    full = problems_of(L)["add_correct"].points
    assert serial["solution"]["add_correct"][0] == serial["autotuned"]["add_correct"][0] == full
    for s in ("blank", "nomask", "exits", "hangs", *CHEATS):
        assert serial[s]["add_correct"][0] == 0, (s, serial[s]["add_correct"][2])
    assert "died" in serial["exits"]["add_correct"][2]
    assert "budget" in serial["hangs"]["add_correct"][2]
    assert all("only graded on a GPU" in serial[s]["add_bandwidth"][2] for s in subs if s != "blank")


def test_interrupted_queue_stops_leaves_no_process_and_resumes_without_regrading(klass, queued):
    _, subs, _ = klass
    n_jobs = len(subs) * len(ONLY)
    first, second = queued["first"], queued["second"]
    assert first["interrupted"] and queued["stored"] >= 5
    assert first["graded"] + first["reused"] < n_jobs  # nothing started after the stop
    assert queued["left"] == [], queued["left"]
    assert not second["interrupted"]
    assert second["reused"] == queued["stored"]
    assert second["graded"] == n_jobs - queued["stored"]
    # Only what the stop cut short is graded twice (a grading killed mid-way is not stored).
    # Only what was not stored is graded, a process that died beside others once more with its GPU alone.
    assert queued["calls_second"] == second["graded"] + len(second["regraded_alone"])
    assert all(s.startswith("exits/") for s in second["regraded_alone"]), second["regraded_alone"]
    print(f"\nserial {TIMES['serial']:.1f} s, queue (4 jobs, stopped and resumed) {TIMES['queue']:.1f} s")


def test_queue_scores_equal_serial_scores(klass, queued):
    _, subs, serial = klass
    assert _scores(queued["second"]["results"]) == _scores(serial)
    assert queued["second"]["failed"] == sum(harness.failed(r[2]) for res in serial.values() for r in res.values())
    assert "0 graded" not in classqueue.describe(queued["second"])


def test_ray_cluster_grades_the_same_scores_and_leaves_nothing_running(klass, rayed):
    _, subs, serial = klass
    first, second = rayed["first"], rayed["second"]
    assert first["interrupted"] and rayed["left"] == [], rayed["left"]
    assert rayed["left_after_shutdown"] == [], rayed["left_after_shutdown"]
    # Killed graders (the stop, the end) first removed their Triton caches and zygotes' logs (GpuGrader.close),
    # from the temporary folder they were given.
    assert {g["temp"] for g in rayed["graders"]} == {str(rayed["temp"])}
    assert rayed["temp_left"] == [], rayed["temp_left"]
    assert not second["interrupted"] and second["reused"] == rayed["stored"]
    assert second["graded"] + second["reused"] == len(subs) * len(ONLY)
    assert _scores(second["results"]) == _scores(serial)
    assert second["mode"] == "ray" and second["gpus"] == 2 and "local cluster" in second["backend"]
    # Pauses are counted from the graders' records (CPU graders drain: none); timings that waited stay unknown.
    records = [json.loads(p.read_text()) for p in rayed["logs"].glob(f"*/{L}/*/result.json")]
    assert second["paused"] == sum(len(s or []) for r in records for s in harness.each_process(r, "paused")) == 0
    assert second["waited_for"] is None
    print(f"\nRay local cluster (4 jobs, stopped and resumed) {TIMES['ray']:.1f} s")


def test_ray_spreads_jobs_over_the_gpus_one_grader_each(klass, rayed):
    """Every job was graded on one of the two fake GPUs, both were used, each by the one grader (a Ray actor) that
    holds that GPU, which ran its jobs' processes under the queue's rule for it (their records name its GPU); the
    driver asks Ray for one GPU per grader and as many jobs at once as it has GPUs' share of them. (On a CPU
    nothing is timed: the rule itself is test_gpu_slots_time_alone_and_share_otherwise, and the GPU run in
    assets/gpu/class_grading.md checks that no grading process held a GPU beside one that timed.)"""
    records = [json.loads(p.read_text()) for p in rayed["logs"].glob(f"*/{L}/*/result.json")]
    runs = [r for r in records if "task_started" in r]
    assert len(runs) >= len(klass[1]) * len(ONLY) - rayed["stored"]
    assert all(len(r["task_gpu_ids"]) == 1 for r in runs)
    assert {r["task_gpu_ids"][0] for r in runs} == {"0", "1"}
    gpu_of = {}
    for r in runs:
        gpu_of.setdefault(r["task_pid"], set()).add(r["task_gpu_ids"][0])
    # one process per GPU graded its jobs: two per run (the fixture's run stopped, then the one resuming it)
    assert all(len(g) == 1 for g in gpu_of.values()) and len(gpu_of) <= 4, gpu_of
    held = [r for r in runs if "holds" in r]
    assert held and all(r["gpu_slot"] == r["task_gpu_ids"][0] for r in held)
    assert rayed["options"]["num_gpus"] == 1 and rayed["options"]["max_concurrency"] == 2
    assert sorted(g["gpu"] for g in rayed["graders"]) == ["0", "1"]
    # the graders import this checkout's kernellab: the cluster's node was started with its folder on PYTHONPATH,
    # which the driver's own environment has again once the node is up
    assert all(str(package_root()) in g["pythonpath"].split(os.pathsep) for g in rayed["graders"]), rayed["graders"]
    assert rayed["driver_path_kept"]
    assert rayed["grader_started_a_cluster"] is False  # it joined the running one, and left it up

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
    from kernellab.grading.judge import store as store_module
    key = store_module.Store.key(L, "solution", h, "fp", "add_correct")
    assert key["grader"] == store_module.grader_version() and len(key["grader"]) == 16


def test_term_autograde_fills_the_gradebook_from_the_store_alone(tmp_path_factory, monkeypatch):
    """``kernellab term autograde --jobs 2``: its queue grades every problem of a small class, then nbgrader
    autograde grades nothing (any grading outside the store fails under KERNELLAB_STORE_ONLY=1), yet the
    gradebook holds exactly the scores of a serial grading."""
    course, rel, src, wrong = new_course(tmp_path_factory, L)
    subs = {"solution": S.filled(rel, src), "crasher": S.filled(rel, src, wrong["exit_in_fused"])}
    for student, nb in subs.items():
        course.submit(L, student, nb)
    secret = course_secret(course.ag)
    serial = {s: harness.grade_notebook(nb, L, s, secret, progress=False) for s, nb in subs.items()}
    summary = classqueue.grade_class(course.ag, L, jobs=2, progress=False)
    assert summary["graded"] == len(subs) * len(problems_of(L))
    monkeypatch.setenv(harness.STORE_ONLY_ENV, "1")
    t0 = time.monotonic()
    r = course.term("autograde", L, "--jobs", "2")
    TIMES["term"] = time.monotonic() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"{len(subs)} students, {len(subs) * len(problems_of(L))} problems: 0 graded" in r.stdout, r.stdout
    for student in subs:
        book = course.cell_scores(L, student)
        assert {gid: book.get(gid) for gid in serial[student]} == {gid: v[0] for gid, v in serial[student].items()}, student
    assert serial["solution"]["add_correct"][0] == serial["solution"]["add_correct"][1] > 0
    assert serial["crasher"]["fused_correct"][0] == 0
    assert "reused_from_store" in course.result(L, "solution", "add_correct")
    print(f"\nterm autograde from the store: {TIMES['term']:.1f} s for {len(subs)} students")
    # One nbgrader process grades the class: a notebook it cannot read fails alone, named, and the others'
    # gradebook rows stay (nbgrader goes on past it).
    broken = course.ag / "submitted" / "broken" / L / f"{L}.ipynb"
    broken.parent.mkdir(parents=True)
    broken.write_text("{ this is not a notebook")
    monkeypatch.delenv(harness.STORE_ONLY_ENV)
    rows = {r["student"]: r for r in term.autograde(course.ag, L, progress=False)}
    assert set(rows) == {*subs, "broken"}
    assert not rows["broken"]["ok"] and rows["broken"]["error"], rows["broken"]
    assert all(rows[s]["ok"] and rows[s]["seconds"] > 0 for s in subs), rows
    assert course.cell_scores(L, "solution")["add_correct"] == serial["solution"]["add_correct"][0]


def test_gpu_slots_time_alone_and_share_otherwise():
    """The rule of grading/classroom/slots.py with stand-in processes on two GPUs: untimed holds share a GPU, a timed
    hold has its GPU to itself (while the other GPU keeps working), and a waiting timed hold is not starved."""
    slots = GpuSlots(2, visible=["3", "5"])
    lock, active, seen, envs = threading.Lock(), {0: [0, 0], 1: [0, 0]}, [], set()

    def job(k: int):
        with slots.place() as gpu:
            envs.add((gpu, slots.env()["CUDA_VISIBLE_DEVICES"]))
            for step in range(3):
                alone = k % 4 == 0 and step == 2  # every fourth job ends by timing
                with slots.hold(alone):
                    with lock:
                        active[gpu][alone] += 1
                        seen.append((gpu, alone, tuple(active[gpu]), tuple(active[1 - gpu])))
                    time.sleep(0.01)
                    with lock:
                        active[gpu][alone] -= 1
    threads = [threading.Thread(target=job, args=(k,)) for k in range(16)]
    [t.start() for t in threads]
    [t.join(timeout=60) for t in threads]
    assert not any(t.is_alive() for t in threads)
    assert envs == {(0, "3"), (1, "5")}
    assert slots.timed_runs == 4
    for gpu, alone, own, _ in seen:
        if alone:
            assert own == (0, 1), own  # nothing else on its GPU
        else:
            assert own[1] == 0
    assert max(own[0] for _, alone, own, _ in seen if not alone) > 1  # untimed work side by side


def test_speed_problems_spread_over_the_gpus_by_their_own_count():
    """A speed problem goes to the GPU with the fewest speed problems in progress (each GPU does their alone work
    one after another), the others to the GPU with the fewest jobs."""
    slots = GpuSlots(2)
    with contextlib.ExitStack() as held:
        place = lambda timed=False: held.enter_context(slots.place(timed=timed))  # noqa: E731
        assert [place(), place(), place()] == [0, 1, 0]  # untimed: fewest jobs (ties: the first GPU)
        assert place(timed=True) == 1  # no timed job anywhere: the fewer jobs
        assert place(timed=True) == 0  # GPU 1 has a timed job, GPU 0 none, though GPU 0 has more jobs (3 to 2)
        assert place(timed=True) == 1  # one each: the fewer jobs (GPU 1: 2 to 3)
        assert place() == 0  # 3 jobs each: the first
        assert place(timed=True) == 0  # two timed jobs on GPU 1, one on GPU 0
    assert slots._jobs == [0, 0] and slots._timed_jobs == [0, 0]  # every job gave its place back


def test_stop_while_waiting_for_a_gpu_raises():
    slots = GpuSlots(1)
    stop = threading.Event()
    with slots.place(), slots.hold(False):
        out = []

        def timed():
            try:
                with slots.place(), slots.hold(True, stop):
                    out.append("ran")
            except KeyboardInterrupt:
                out.append("stopped")
        t = threading.Thread(target=timed)
        t.start()
        time.sleep(0.3)
        stop.set()
        t.join(timeout=5)
    assert out == ["stopped"]


def test_the_grading_process_judges_a_timing_on_the_jobs_gpu_never_beside_a_timing(monkeypatch):
    """The grading process's own GPU work for a speed problem (timing.judge_speed: inputs and references rebuilt on
    the GPU) is an untimed user of the job's GPU: it waits for a timing running there, and a timer that asks while it
    runs waits for it. It once ran beside the next judge's timing."""
    from kernellab import timing
    slots, seen = GpuSlots(2, visible=["0", "1"]), []

    def judge_speed(problem, seed, m, ceil):
        seen.append((time.monotonic(), [len(h) for h in slots._holders], list(slots._alone)))
        time.sleep(0.3)
        return "judged"
    monkeypatch.setattr(timing, "judge_speed", judge_speed)
    timer = slots.hold(True)
    with harness.use_slots(slots), slots.place():  # one job on GPU 0 (the fewest jobs), its timing running
        timer.__enter__()
        out = []
        t = threading.Thread(target=lambda: (slots._local.__setattr__("gpu", 0),
                                             out.append(harness._judge_speed_here(None, 1, {}, None))))
        t0 = time.monotonic()
        t.start()
        time.sleep(0.3)
        assert seen == []  # waits for the timing on its GPU
        timer.__exit__(None, None, None)
        time.sleep(0.1)
        assert len(seen) == 1 and seen[0][1:] == ([1, 0], [False, False])  # now an untimed user of GPU 0
        t1 = time.monotonic()
        with slots.hold(True):  # a timer asking meanwhile starts once that work is done
            assert time.monotonic() - seen[0][0] >= 0.29 and time.monotonic() - t1 > 0.1
        t.join(timeout=10)
    assert out == ["judged"] and seen[0][0] - t0 >= 0.29 and slots._holders == [set(), set()]
    # A timer that only waits (here for an untimed process) does not hold it back: it is short and comes once per
    # speed problem, and behind waiting timers a class's speed problems kept their places until all had timed.
    with slots.place() as g, slots.hold(False):
        timer = slots.hold(True)
        waiter = threading.Thread(target=timer.__enter__)
        waiter.start()
        while not slots._waiting[g]:
            time.sleep(0.01)
        got = []

        def judge():
            slots._local.gpu = g
            got.append(harness._judge_speed_here(None, 1, {}, None))
        with harness.use_slots(slots):
            j = threading.Thread(target=judge, daemon=True)  # daemon: a failure here must not hang the suite
            j.start()
            j.join(timeout=2)
            assert got == ["judged"] and slots._waiting[g] == 1
    waiter.join(timeout=10)
    assert slots._alone[g]  # and the timer went once the untimed process ended
    timer.__exit__(None, None, None)


def test_a_hold_given_back_after_tuning_is_shared_at_once_and_keeps_a_waiting_timer_out():
    """``share`` (a tuning worker's hold once its tuning is timed) makes an alone hold a shared one with no gap: a
    timed hold already waiting still waits for it to end, and does start then; untimed holds may start beside it
    once no timer waits."""
    slots, order = GpuSlots(1), []
    hold = slots.hold(True)
    held = hold.__enter__()

    def timed():
        with slots.hold(True):
            order.append("timer")
    t = threading.Thread(target=timed)
    t.start()
    time.sleep(0.3)  # the timer waits for our alone hold
    slots.share(held)
    assert not held.alone
    time.sleep(0.3)
    assert order == []  # not beside us: we still run
    hold.__exit__(None, None, None)
    t.join(timeout=10)
    assert order == ["timer"]
    hold = slots.hold(True)
    slots.share(hold.__enter__())
    t0 = time.monotonic()
    with slots.hold(False):  # untimed work beside a hold given back, no timer waiting
        assert time.monotonic() - t0 < 1
    hold.__exit__(None, None, None)
    assert slots._alone == [False] and slots._holders == [set()]


def test_a_job_out_of_memory_beside_others_is_graded_again_with_its_gpu_alone(tmp_path, monkeypatch):
    """A problem that ran out of GPU memory while other jobs shared its GPU is graded once more, every process of
    it holding the GPU alone; the second grading is the one kept (and stored). One that ran out of memory with
    its GPU to itself (one job at a time) is not graded again: that failure was its own."""
    from kernellab.problems.base import Outcome
    sub = tmp_path / "submitted"
    rel = S.read(__import__("kernellab.paths", fromlist=["repo_root"]).repo_root() / "notebooks" / L / f"{L}.ipynb")
    for s in ("a", "b", "c"):
        (sub / s / L).mkdir(parents=True)
        rel.metadata["who"] = s
        S.write(rel, sub / s / L / f"{L}.ipynb")
    calls, lock = [], threading.Lock()

    def fake(p, nb, *a):
        slots, who = harness._SLOTS, nb.metadata["who"]
        time.sleep(0.3)  # long enough for the three jobs at a time to overlap
        with slots.hold(False):  # what a worker process does
            with lock:
                alone = slots._alone[slots.gpu()]
                calls.append((who, p.id, alone))
        oom = who == "b" and p.id == "add_correct" and not alone
        msg = "`add` raised OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" if oom else "ok"
        return Outcome(p.id, 0.0 if oom else 1.0, msg), {}
    monkeypatch.setattr(harness, "grade_problem", fake)
    out = classqueue.grade_class(tmp_path, L, jobs=3, progress=False)
    full = problems_of(L)["add_correct"].points
    assert out["regraded_alone"] == ["b/add_correct"]
    assert out["results"]["b"]["add_correct"] == (full, full, "ok")
    assert [c for c in calls if c[:2] == ("b", "add_correct")] == [("b", "add_correct", False), ("b", "add_correct", True)]
    calls.clear()
    alone = classqueue.grade_class(tmp_path, L, jobs=1, progress=False, force=True, only=["add_correct"])
    assert alone["regraded_alone"] == [] and "out of memory" in alone["results"]["b"]["add_correct"][2]
    assert len(calls) == 3
    from kernellab.grading.classroom.slots import grade_again_alone, out_of_memory, timed_short_of_memory
    assert out_of_memory("RuntimeError: CUDA error: out of memory") and not out_of_memory("ok")
    assert timed_short_of_memory({"baseline_alloc_retries": 2}) and not timed_short_of_memory({"alloc_retries": 0})
    assert grade_again_alone("The process running your code died (exit code 1) while running it")
    assert "graded again with the GPU alone" in classqueue.describe(out)


def test_ray_places_jobs_on_its_graders_as_the_queue_places_them_on_gpus():
    """RayGrader.grade with stand-in graders: a job goes to the grader with the fewest jobs in progress, a speed
    problem to the one with the fewest speed problems first; each grader's own rule (a GpuSlots of its GPU, the
    queue's, graded again alone after running out of memory beside others) is the queue's, tested there."""
    from kernellab.grading.classroom.cluster import RayGrader
    got = []

    class Grader:
        def __init__(self, k):
            self.grade = types.SimpleNamespace(remote=lambda *args: got.append(k) or {
                "fraction": 1.0, "message": "ok", "details": {}, "record": {}})
    g = RayGrader.__new__(RayGrader)  # no cluster: the graders are stand-ins, _wait hands their result back
    g.graders, g._lock, g._wait = [Grader(0), Grader(1)], threading.Lock(), lambda ref: ref
    g._jobs, g._timed = [3, 1], [0, 1]  # in progress: grader 0 has more jobs, grader 1 a speed problem
    nb = S.filled(*C._notebooks(L))
    outcome, _ = g.grade(problems_of(L)["add_correct"], nb, 1, {}, {}, L)
    assert outcome.fraction == 1.0 and got == [1]  # fewest jobs
    g.grade(problems_of(L)["add_bandwidth"], nb, 1, {}, {}, L)
    assert got == [1, 0]  # fewest speed problems, though it has more jobs
    assert g._jobs == [3, 1] and g._timed == [0, 1]  # each job gave its place back

def test_timing_cores_are_kept_per_gpu_where_cores_spare():
    """grading/classroom/cores.py: two cores per GPU for its timed process, the highest-numbered, and the untimed processes
    on the rest; nothing kept where fewer than four cores would be left."""
    from kernellab.grading.classroom.cores import timing_cores, untimed_cores
    sixteen = set(range(16))
    assert timing_cores(0, 1, sixteen) == {14, 15} and untimed_cores(1, sixteen) == set(range(14))
    assert (timing_cores(0, 2, sixteen), timing_cores(1, 2, sixteen)) == ({14, 15}, {12, 13})
    assert untimed_cores(2, sixteen) == set(range(12))
    assert timing_cores(0, 1, {0, 1, 2, 3, 4}) == set() and untimed_cores(1, {0, 1, 2, 3, 4}) == {0, 1, 2, 3, 4}
    assert timing_cores(0, 1, {3, 5, 8, 9, 11, 20}) == {11, 20}  # the cores this process may use, not 0..n-1
    import kernellab.grading.classroom.cores as cores_mod
    saved, cores_mod.TIMING_CORES = cores_mod.TIMING_CORES, 0  # KERNELLAB_TIMING_CORES=0: none kept
    try:
        assert timing_cores(0, 1, sixteen) == set() and untimed_cores(1, sixteen) == sixteen
    finally:
        cores_mod.TIMING_CORES = saved


def _stand_in(tmp_path, monkeypatch, name: str, source: str):
    """A stand-in grading process ``standin.NAME`` (started fresh: it is not the zygote's module), an empty job
    folder tmp_path/job, and one core kept for timing on this machine. Returns grading/classroom/cores.py."""
    from kernellab.grading.classroom import cores as cores_mod
    from kernellab.grading.processes import zygote
    monkeypatch.setattr(cores_mod, "TIMING_CORES", 1)
    monkeypatch.setattr(cores_mod, "SPARE_CORES", 1)
    pkg = tmp_path / "standin"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / f"{name}.py").write_text(source)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setattr(zygote, "spawn", lambda *a, **k: None)
    (tmp_path / "job").mkdir(exist_ok=True)
    return cores_mod


_STAND_IN_JUDGE = """
import os, pathlib, sys, time
job = pathlib.Path(sys.argv[1])
time.sleep(0.5)  # the parent pins a child just after starting it
start = sorted(os.sched_getaffinity(0))
from kernellab.grading.classroom.slots import ask_for_gpu_alone
ask_for_gpu_alone(job, "run")
(job / "cores.txt").write_text(f"{start} {sorted(os.sched_getaffinity(0))}")
(job / "phase").write_text("done")
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two cores")
def test_a_timed_judge_runs_on_its_gpus_own_cores(tmp_path, monkeypatch):
    """Under a class queue a judge starts on the untimed cores, and once it has its GPU alone, on the timing cores
    kept for that GPU (here one core of this machine for timing, the rest for everything else); its record says
    which."""
    cores_mod = _stand_in(tmp_path, monkeypatch, "judge", _STAND_IN_JUDGE)
    job = tmp_path / "job"
    slots = GpuSlots(1)
    timed, untimed = slots.cores(True), slots.cores(False)
    assert timed and untimed and not timed & untimed
    with harness.use_slots(slots):
        why, info = harness._run_child(job, False, None, module="standin.judge", result="cores.txt", handoff=True)
    assert why is None, why
    assert (job / "cores.txt").read_text() == f"{sorted(untimed)} {sorted(timed)}"
    assert info["cores"] == {"start": sorted(untimed), "timed": sorted(timed)}
    assert [h[2] for h in info["holds"]] == [False, True]  # shared until it asked to time, then alone
    marks = [p[0] for p in info["phases"]]  # the phases as the parent saw them, the GPU alone given in between
    assert marks[0] == "start" and marks[-1] == "end" and marks.index("alone") < marks.index("alone-go")
    assert [t for _, t in info["phases"]] == sorted(t for _, t in info["phases"])
    # A machine with no cores to spare keeps none: the judge runs anywhere, and its record says nothing was pinned.
    monkeypatch.setattr(cores_mod, "SPARE_CORES", 10 ** 6)
    (job / "go").unlink()
    with harness.use_slots(GpuSlots(1)):
        why, info = harness._run_child(job, False, None, module="standin.judge", result="cores.txt", handoff=True)
    everywhere = sorted(os.sched_getaffinity(0))
    assert why is None and info["cores"] == {}
    assert (job / "cores.txt").read_text() == f"{everywhere} {everywhere}"


_STAND_IN_TUNER = """
import os, pathlib, sys, time
job = pathlib.Path(sys.argv[1])
time.sleep(0.5)  # the parent pins a child just after starting it
from kernellab.grading.classroom.slots import ask_for_gpu_alone, ask_to_share
ask_for_gpu_alone(job, "compile")
alone = sorted(os.sched_getaffinity(0))
ask_to_share(job, "run")
time.sleep(0.5)
t0 = time.monotonic()
while not (job / "beside.txt").exists() and time.monotonic() - t0 < 20:  # untimed work started beside it?
    time.sleep(0.01)
(job / "cores.txt").write_text(f"{alone} {sorted(os.sched_getaffinity(0))} {(job / 'beside.txt').exists()}")
(job / "phase").write_text("done")
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two cores")
def test_a_tuning_worker_gives_its_gpu_back_once_tuned(tmp_path, monkeypatch):
    """A speed problem's worker holds its GPU alone (and the timing cores) while its tuning is timed, then asks to
    share (slots.ask_to_share): its recording runs on the untimed cores with untimed work started beside it."""
    _stand_in(tmp_path, monkeypatch, "tuner", _STAND_IN_TUNER)
    job = tmp_path / "job"
    slots = GpuSlots(1)
    timed, untimed = slots.cores(True), slots.cores(False)

    def beside():  # another job's untimed process, once the tuner records
        while not (job / "phase").exists() or (job / "phase").read_text() != "run":
            time.sleep(0.01)
        with slots.place(), slots.hold(False):
            (job / "beside.txt").write_text("ran")
    t = threading.Thread(target=beside, daemon=True)
    t.start()
    with harness.use_slots(slots), slots.place():
        why, info = harness._run_child(job, False, None, module="standin.tuner", result="cores.txt", handoff=True)
    t.join(timeout=10)
    assert why is None, why
    assert (job / "cores.txt").read_text() == f"{sorted(timed)} {sorted(untimed)} True"
    assert [h[2] for h in info["holds"]] == [False, True, False]  # shared, alone to tune, shared to record
    marks = [p[0] for p in info["phases"]]
    assert marks.index("alone-go") < marks.index("shared") < marks.index("shared-go") < marks.index("run")


_STAND_IN_WORKER = """
import os, pathlib, sys
import torch
job = pathlib.Path(sys.argv[1])
(job / "threads.txt").write_text(f"{torch.get_num_threads()} {os.environ.get('OMP_NUM_THREADS')}")
(job / "phase").write_text("done")
"""


def test_the_grading_process_itself_uses_a_grading_process_s_share_while_a_class_is_graded():
    # Its job threads make cases and fp64 references beside the grading processes: capped as they are for the
    # class, as it was after.
    import torch
    before = torch.get_num_threads()
    slots = GpuSlots(1, jobs=8)
    from kernellab.grading.classroom.cores import threads_each
    assert slots.threads == threads_each(8, 1)
    with slots.grading_threads():
        assert torch.get_num_threads() == slots.threads
    assert torch.get_num_threads() == before
    with GpuSlots(1).grading_threads():  # no jobs given: nothing capped
        assert torch.get_num_threads() == before


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two cores")
def test_the_grading_process_keeps_off_the_timing_cores_while_a_class_is_graded(monkeypatch):
    """While a class is graded the grading process's threads, those it had and those it starts, run on the untimed
    cores only (its fp64 references ran on the timing cores too, under a tuning worker's autotuner); the cores the
    slots hand out stay those of the whole machine; afterwards it runs where it ran before."""
    from kernellab.grading.classroom import cores as cores_mod
    monkeypatch.setattr(cores_mod, "TIMING_CORES", 1)
    monkeypatch.setattr(cores_mod, "SPARE_CORES", 1)
    before = os.sched_getaffinity(0)
    slots = GpuSlots(1, jobs=2)
    timed, untimed = slots.cores(True), slots.cores(False)
    assert timed and untimed and timed | untimed == before
    started_before = threading.Event()
    seen = {}

    def old_thread():  # a thread the process had before the class began (a Ray worker's, a sampler)
        started_before.wait(10)
        seen["old"] = os.sched_getaffinity(0)
    old = threading.Thread(target=old_thread)
    old.start()
    with slots.grading_threads():
        assert os.sched_getaffinity(0) == untimed
        t = threading.Thread(target=lambda: seen.setdefault("new", os.sched_getaffinity(0)))
        t.start()
        t.join(10)
        started_before.set()
        old.join(10)
        assert seen == {"old": untimed, "new": untimed}
        assert (slots.cores(True), slots.cores(False)) == (timed, untimed)  # still the machine's split
    assert os.sched_getaffinity(0) == before


@pytest.mark.parametrize("forked", [True, False])
def test_a_queues_grading_processes_use_their_share_of_the_cores(tmp_path, monkeypatch, forked):
    """Each grading process of a queue runs torch's CPU work on at most its share of the untimed cores (one
    thread when jobs outnumber them), whether it is forked from the warm process or started fresh; without a
    queue nothing is capped. Uncapped, a class's processes together ran many threads per core (lesson 03 on two
    H100s: 30 % longer in its processes)."""
    from kernellab.grading.processes import zygote
    from kernellab.grading.classroom.cores import threads_each
    assert threads_each(18, 2, set(range(32))) == 1  # 28 untimed cores, 18 jobs
    assert threads_each(2, 1, set(range(16))) == 7  # 14 untimed cores, 2 jobs
    assert threads_each(4, 1, {0, 1}) == 1  # too few cores to keep any: all shared, still one at least
    assert GpuSlots(1).thread_env() == {}
    pkg = tmp_path / "standin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "worker.py").write_text(_STAND_IN_WORKER)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    if not forked:
        monkeypatch.setattr(zygote, "spawn", lambda *a, **k: None)
    job = tmp_path / "job"
    job.mkdir()
    try:
        with harness.use_slots(GpuSlots(1, jobs=len(os.sched_getaffinity(0)))):  # a job per core: one thread each
            why, _ = harness._run_child(job, False, None, module="standin.worker", result="threads.txt")
        assert why is None, why
        assert (job / "threads.txt").read_text() == "1 1"
        (job / "threads.txt").unlink()
        why, _ = harness._run_child(job, False, None, module="standin.worker", result="threads.txt")  # no queue
        assert why is None, why
        n, omp = (job / "threads.txt").read_text().split()
        assert omp == "None" and (int(n) > 1 or len(os.sched_getaffinity(0)) < 2)
    finally:
        zygote.stop_all()


def test_a_nodes_ceilings_are_measured_once_with_its_gpu_alone(tmp_path, monkeypatch):
    """Ray tasks on a GPU node (stand-ins: a fake GPU, measurements that only count themselves): the first task
    measures the ceilings holding its GPU alone (as a timing does), the file caches them, and tasks after it read
    them without taking the GPU."""
    import types

    from kernellab import ceilings
    from kernellab.grading.classroom import cluster
    measured, holds = [], []

    class Lock:
        @contextlib.contextmanager
        def hold(self, alone, stop=None):
            holds.append(alone)
            yield "0"
            holds.append("released")

    def measure(value):
        def run():
            measured.append(holds[-1] is True)  # inside an alone hold, not yet released
            return value
        return run
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(ceilings, "DEVICE", types.SimpleNamespace(on_gpu=True, name="Stand-in GPU"))
    monkeypatch.setattr(ceilings, "_cache", {})
    monkeypatch.setattr(ceilings, "_measure_copy", measure(3000.0))
    monkeypatch.setattr(ceilings, "_measure_matmul", measure(700.0))
    monkeypatch.setattr(ceilings.torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr("kernellab.learner.facts", lambda: {"ridge": 700e12 / 3000e9})
    ceil, facts = cluster._node_facts(Lock())
    assert measured == [True, True] and holds == [True, "released"]
    assert (ceil.copy_gbps, ceil.fp16_tflops, ceil.measured) == (3000.0, 700.0, True)
    ceilings._cache.clear()  # another worker process: nothing in memory, the file has them
    cluster._node_facts(Lock())
    assert measured == [True, True] and holds == [True, "released"]
