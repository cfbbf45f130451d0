"""Pieces of the grade of record that need no nbgrader run."""
import math
import os
import pathlib

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from kernellab.grading.judge.harness import clamp_points
from kernellab.grading.judge.secret import problem_seed
from kernellab.notebook_source import sources_for
from procs import alive, gone


def _nb(*cells):
    return new_notebook(cells=list(cells))


def _sol(src, gid):
    c = new_code_cell(src)
    c.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": gid}
    return c


def test_only_the_cells_a_problem_needs_are_run():
    nb = _nb(_sol("import os\nos._exit(1)\n", "boom"),
             _sol("BLOCK = 128\ndef helper(n):\n    return n\n", "helpers"),
             _sol("def add(x, y):\n    return helper(x)\n", "add_code"))
    sources, missing = sources_for(nb, ("add",))
    assert missing is None
    assert len(sources) == 2 and "os._exit" not in "".join(sources)


def test_stripped_metadata_falls_back_to_what_cells_define():
    nb = _nb(new_code_cell("x = 1"), new_code_cell("%matplotlib inline\ndef add(x, y):\n    return x\n"))
    sources, missing = sources_for(nb, ("add",))
    assert missing is None and "def add" in sources[-1] and "%matplotlib" not in sources[-1]


def test_missing_definition_and_syntax_error_are_explained():
    assert "does not define add" in sources_for(_nb(_sol("y = 2", "a")), ("add",))[1]
    assert "syntax error" in sources_for(_nb(_sol("def add(x, y:\n  pass", "a")), ("add",))[1]


@pytest.mark.parametrize("value,expected", [(float("nan"), 0), (-3, 0), (1e9, 4), (0.5, 2), (float("inf"), 0),
                                            ("1", 0), (None, 0)])
def test_scores_reaching_nbgrader_are_finite_and_clamped(value, expected):
    got = clamp_points(value, 4)
    assert math.isfinite(got) and got == expected


def test_seeds_differ_per_student_and_problem_and_depend_on_the_secret():
    a = problem_seed(b"s1", "ann", "L", "add")
    assert a == problem_seed(b"s1", "ann", "L", "add")
    assert len({a, problem_seed(b"s1", "bob", "L", "add"), problem_seed(b"s1", "ann", "L", "fused"),
                problem_seed(b"s2", "ann", "L", "add")}) == 4


def _grade(src, monkeypatch, **budgets):
    from kernellab.grading.judge import harness
    from kernellab.lessons.l01_roofline_vector_add.problems import ADD
    for k, v in budgets.items():
        monkeypatch.setattr(harness, k, v)
    return harness.grade_problem(ADD, _nb(_sol(src, "add_code")), seed=1234, lesson="01_roofline_vector_add")


def test_endless_loop_is_stopped_by_its_budget(monkeypatch):
    outcome, record = _grade("def add(x, y):\n    while True:\n        pass\n", monkeypatch, COMPILE_BUDGET=3.0)
    assert outcome.fraction == 0 and "longer than its budget" in outcome.message
    assert record["last_phase"] == "compile"


def test_endless_loop_while_loading_is_stopped(monkeypatch):
    outcome, _ = _grade("while True:\n    pass\ndef add(x, y):\n    pass\n", monkeypatch, LOAD_BUDGET=3.0)
    assert outcome.fraction == 0 and "loading your code" in outcome.message


def test_child_sees_no_grading_marker(monkeypatch):
    # Graded code cannot read the environment at all (code_rules: no os); the child's is clean regardless.
    from kernellab.grading.judge import harness
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv("KERNELLAB_SECRET", "s3cret")
    env = harness._child_env()
    assert not any(k.startswith(("NBGRADER_", "KERNELLAB_SECRET")) for k in env)
    src = "import os\nGRADING = 'NBGRADER_EXECUTION' in os.environ\ndef add(x, y):\n    raise NotImplementedError\n"
    outcome, _ = _grade(src, monkeypatch)
    assert outcome.fraction == 0 and "imports os" in outcome.message


def test_the_learners_own_check_applies_the_grading_rules():
    # A function defined in a notebook cell (here registered the way exec_cells does, as IPython does) whose
    # cell breaks a rule fails the learner's check with the same explanation the grade of record gives.
    from kernellab import learner
    from kernellab.notebook_cells import exec_cells, new_namespace
    from kernellab.lessons.l01_roofline_vector_add.problems import ADD
    from kernellab.report import CheckFailed
    ns = new_namespace("01_roofline_vector_add")
    exec_cells(["import os\n\ndef add(x, y):\n    return x + y\n"], ns, tag="rules")
    with pytest.raises(CheckFailed) as e:
        learner.check(ADD, ns["add"])
    assert "imports os" in str(e.value) and "Graded cells may import only" in str(e.value)


def test_a_grading_child_dies_with_its_parent(tmp_path):
    # A regrade stopped by `timeout` left its children timing on the GPU and skewed the next gradings
    # (seen on an H200). Here a stand-in parent starts a child that would sleep a minute, then dies;
    # the child must be gone within seconds.
    import subprocess
    import sys
    import textwrap
    child = textwrap.dedent("""
        import sys, time
        from kernellab.grading.processes.zygote import die_with_parent
        die_with_parent(int(sys.argv[1]))
        open(sys.argv[2], "w").write("armed")
        time.sleep(60)
    """)
    armed = tmp_path / "armed"
    parent = textwrap.dedent(f"""
        import os, subprocess, sys, time
        p = subprocess.Popen([sys.executable, "-c", {child!r}, str(os.getpid()), {str(armed)!r}],
                             start_new_session=True, stdout=subprocess.DEVNULL)
        print(p.pid, flush=True)
        while not os.path.exists({str(armed)!r}):
            time.sleep(0.05)
        os._exit(0)
    """)
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=60)
    pid = int(out.stdout.split()[0])
    assert armed.exists()
    assert gone(pid), "the child outlived its parent"


def test_a_grading_child_whose_parent_is_already_gone_exits():
    import subprocess
    import sys
    code = "from kernellab.grading.processes.zygote import die_with_parent; die_with_parent(1 << 22); print('ran on')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 70 and "ran on" not in out.stdout


def test_gpu_state_reads_nvidia_smi_and_falls_back_to_the_older_field_name(tmp_path, monkeypatch):
    """The judge records the GPU's clocks, power and the driver's reasons around each timing; a driver that does
    not know the newer reasons field is asked with the older one; no nvidia-smi gives {}."""
    from kernellab.grading.classroom.gpu_usage import gpu_state
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\n"
                    "case \"$1\" in *clocks_event_reasons*) echo 'Field is not a valid field' >&2; exit 2;; esac\n"
                    f"echo \"$@\" > {tmp_path / 'asked'}\n"
                    "echo '1755, 2619, 412.30, 61, 0x0000000000000004'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc,1")
    assert gpu_state() == {"sm_mhz": 1755.0, "mem_mhz": 2619.0, "power_w": 412.3, "temp_c": 61.0,
                           "reasons": "0x0000000000000004"}
    asked = (tmp_path / "asked").read_text()
    assert "clocks_throttle_reasons.active" in asked and asked.split()[-2:] == ["-i", "GPU-abc"]
    fake.write_text("#!/bin/sh\necho '[N/A], 2619, 412.30, 61'\n")  # old field refused too: the four fields alone
    assert gpu_state("0") == {"sm_mhz": None, "mem_mhz": 2619.0, "power_w": 412.3, "temp_c": 61.0}
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert gpu_state() == {}


def test_jobs_at_once_follow_the_cpu_cores_as_well_as_gpu_memory():
    from kernellab.grading.classroom.classqueue import jobs_per_gpu, jobs_within
    from kernellab.grading.classroom.cores import untimed_cores
    h200, h100 = jobs_per_gpu(150_000_000_000), jobs_per_gpu(85_000_000_000)  # 139.7 and 79.2 GiB
    assert (h200, h100, jobs_per_gpu(4 * 2**30), jobs_per_gpu(400 * 2**30)) == (16, 9, 1, 16)
    two_h200 = len(untimed_cores(2, set(range(32))))  # 28: two cores kept for each GPU's timing
    assert jobs_within(h200, 2, 32, two_h200) == 18  # the cores, not the memory (32), limit two H200s
    assert jobs_within(h200, 1, 32, len(untimed_cores(1, set(range(32))))) == 16  # one GPU: its memory's cap
    assert jobs_within(h100, 1, 32, len(untimed_cores(1, set(range(32))))) == 9  # an 80 GB H100: its memory
    assert jobs_within(h200, 1, 16, len(untimed_cores(1, set(range(16))))) == 9  # 14 untimed cores
    assert jobs_within(12, 4, 8, 4) == 4 and jobs_within(12, 4, 4, 4) == 2  # one per GPU at least; two cores short
    assert jobs_within(1, 1, 2, 2) == 1


def test_jobs_at_once_count_the_cores_this_process_may_use(monkeypatch):
    # Under taskset, or a Slurm or container cpuset, the machine has more cores than the grading may use.
    from kernellab.grading.classroom import classqueue
    from kernellab.grading.classroom import cores
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {4, 5, 6, 7}, raising=False)
    assert cores.usable() == 4 and classqueue.default_jobs() == 2  # on a CPU: half of them
    assert len(cores.untimed_cores(1)) == 4  # too few to keep any for timing


def test_a_local_ray_cluster_is_told_of_the_gpus_it_was_given():
    from kernellab.grading.classroom.classqueue import ray_local_init
    assert ray_local_init(1, None, on_machine=2) == {"num_gpus": 1}
    assert ray_local_init(4, {"num_cpus": 8}, on_machine=2) == {"num_gpus": 2, "num_cpus": 8}  # no more than it has
    assert ray_local_init(None, {"num_cpus": 8}, on_machine=2) == {"num_cpus": 8}  # every GPU: Ray counts them
    assert ray_local_init(2, None, on_machine=0) is None  # a CPU: no GPUs to tell of



def test_a_grading_leaves_nothing_in_the_temporary_folder(tmp_path):
    # A grading process (nbgrader's, a Ray worker's, the queue's) leaves nothing in the temporary folder: the
    # learner code's scratch folder goes with its grading, its Triton caches and the zygote's logs with
    # the process (a class once left a folder per job in /tmp).
    import json
    import os
    import pathlib
    import subprocess
    import sys
    src = ("import numpy as np\ndef add(x, y):\n    np.save('left_behind.npy', np.arange(3) + 40)\n"
           "    raise ValueError('wrote ' + str(np.load('left_behind.npy').tolist()))\n")
    code = f"""
import json, sys
sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})
from nbformat.v4 import new_code_cell, new_notebook
from kernellab.grading.judge import harness
from kernellab.lessons.l01_roofline_vector_add.problems import ADD
c = new_code_cell({src!r})
c.metadata["nbgrader"] = {{"solution": True, "grade": False, "grade_id": "add_code"}}
outcome, _ = harness.grade_problem(ADD, new_notebook(cells=[c]), seed=7, lesson="01_roofline_vector_add")
print(json.dumps([outcome.fraction, outcome.message, sorted(p.name[:9] for p in __import__("pathlib").Path({str(tmp_path)!r}).iterdir())]))
"""
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(tmp_path)},
                         capture_output=True, text=True, timeout=300)
    fraction, message, during = json.loads(out.stdout.strip().splitlines()[-1])
    assert fraction == 0 and "wrote [40, 41, 42]" in message  # the learner's file was written and read back
    assert during, "the grading made no temporary folder of its own: this test would prove nothing"
    assert sorted(tmp_path.iterdir()) == []


def test_each_submission_s_workers_have_a_triton_cache_of_their_own(monkeypatch):
    # Workers of one submission share a Triton cache; another submission's workers never see it, nor the judges'
    # cache, nor the one the instructor's environment names (Triton's one default cache let a worker overwrite
    # another student's compiled kernels and launchers). So with Inductor's cache, inside it (its default, one per
    # user, let a worker plant the code a baseline judge's torch.compile would generate and load).
    from nbformat.v4 import new_code_cell, new_notebook

    from kernellab.grading.judge import harness
    from kernellab.lessons.l01_roofline_vector_add.problems import ADD
    monkeypatch.setenv("TRITON_CACHE_DIR", "/nowhere/the-instructors-cache")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/nowhere/the-instructors-inductor")

    def notebook(tag):
        c = new_code_cell(f"import triton\ndef add(x, y):  # {tag}\n    raise ValueError('at ' + triton.knobs.cache.dir)\n")
        c.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "add_code"}
        return new_notebook(cells=[c])

    told = []  # the environment each grading process was started with (forked or fresh)
    spawn = harness.zygote.spawn
    monkeypatch.setattr(harness.zygote, "spawn", lambda module, args, env, *a: told.append(env) or spawn(module, args, env, *a))

    def cache_of(nb):
        told.clear()
        outcome, _ = harness.grade_problem(ADD, nb, seed=3, lesson="01_roofline_vector_add")
        assert outcome.fraction == 0 and "at " in outcome.message, outcome.message
        cache = outcome.message.split("at ", 1)[1].split()[0].strip("'\".,")
        worker, *judges = [e["TORCHINDUCTOR_CACHE_DIR"] for e in told]
        assert worker == str(pathlib.Path(cache) / "inductor")
        judges_cache = harness.triton_cache("judge" if harness.DEVICE.on_gpu else "interpreting-judge")
        assert all(j == str(pathlib.Path(judges_cache) / "inductor") for j in judges)
        return cache

    # A judge that interprets kernels (all of them on a CPU) runs their bodies: it gets a cache of its own kind, never
    # the one whose launchers a GPU judge loads.
    from kernellab.grading.instructor import submissions as S
    from kernellab.paths import repo_root
    lesson = "01_roofline_vector_add"
    told.clear()
    solved, _ = harness.grade_problem(ADD, S.read(repo_root() / "solutions" / lesson / f"{lesson}.ipynb"), seed=3,
                                      lesson=lesson)
    assert solved.fraction == 1.0, solved.message
    worker_env, judge_env = told
    interpreting = harness.triton_cache("interpreting-judge")
    assert judge_env["TRITON_CACHE_DIR"] == interpreting != harness.triton_cache("judge")
    assert worker_env["TRITON_CACHE_DIR"] not in (interpreting, harness.triton_cache("judge"))

    a, b = notebook("a"), notebook("b")
    first, again, other = cache_of(a), cache_of(a), cache_of(b)
    assert first == again != other
    judge = harness.triton_cache("judge")
    assert judge not in (first, other) and "the-instructors-cache" not in first + other
    assert all(pathlib.Path(c).is_dir() for c in (first, other, judge))
    # a worker told of its own cache is not told where the others are: no folder of the grading's holds them
    import tempfile
    assert {pathlib.Path(c).parent for c in (first, other, judge)} == {pathlib.Path(tempfile.gettempdir())}
    harness.drop_triton_caches()
    assert not any(pathlib.Path(c).exists() for c in (first, other, judge))


def test_the_steps_of_a_graded_run_share_its_budget_and_its_message(tmp_path):
    # A speed worker reports the steps of its recorded call ("run-call", "run-keep"): each is held to the run's
    # budget, and one that overruns is told as the graded run, not as loading.
    import subprocess
    import sys

    from kernellab.grading.judge import harness
    code = ("import pathlib, sys, time\np = pathlib.Path(sys.argv[1]) / 'phase'\np.write_text('run')\n"
            "time.sleep(0.2)\np.write_text('run-call')\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], start_new_session=True)
    seen = []
    try:
        why, phase = harness._watch(proc, tmp_path, {"run": 1.0, "load": 100.0}, None, seen)
    finally:
        proc.kill()
        proc.wait()
    assert phase == "run-call" and "the graded run took longer than its budget of 1 s" in why
    assert [p[0] for p in seen][-2:] == ["run", "run-call"]


def test_a_ray_grader_closing_waits_out_its_jobs_and_then_cleans_up():
    # A job already past its last check of the stop can still make a Triton cache (or start a zygote) after close()
    # first cleaned up (CI once found a zygote's folder left by killed graders): close() waits its jobs out, then
    # cleans again, and no job starts once it began.
    import threading
    import time

    import nbformat
    from nbformat.v4 import new_notebook

    from kernellab.grading.judge import harness
    from kernellab.grading.classroom.cluster import GpuGrader
    g = GpuGrader.__new__(GpuGrader)  # no Ray: the grader's own bookkeeping
    g._jobs, g._jobs_cv, g.gpu, g.ceil, g.facts, g.slots = 0, threading.Condition(), None, None, None, None
    made, inside, ended = [], threading.Event(), []

    def late_job(p, nb, seed, ceil, facts, lesson):
        inside.set()
        while not harness._STOP.is_set():
            time.sleep(0.01)
        time.sleep(0.3)  # past its check: it makes its cache after close()'s first clean-up
        made.append(harness.triton_cache("a late job"))
        raise KeyboardInterrupt("grading interrupted")
    g.grade_one = late_job
    text = nbformat.writes(new_notebook())

    def job():
        try:
            g.grade("01_roofline_vector_add", "add_correct", text, 1)
        except KeyboardInterrupt as exc:
            ended.append(str(exc))
    t = threading.Thread(target=job)
    t.start()
    assert inside.wait(30)
    try:
        g.close()
        t.join(10)
        assert ended == ["grading interrupted"] and made and not pathlib.Path(made[0]).exists()
        with pytest.raises(KeyboardInterrupt, match="stopping"):
            g.grade("01_roofline_vector_add", "add_correct", text, 1)
    finally:
        harness.resume()


def test_the_gpu_report_says_when_the_notebook_was_not_executed(tmp_path):
    from kernellab.gpu_report import write_report
    scores = {"a_correct": 3.0}
    res = {"header": ["- GPU: test"], "notebooks": {
        "01_roofline_vector_add": {"wall_s": float("nan"), "errors": [], "outputs": []},
        "02_tiled_matmul": {"wall_s": 121.4, "errors": [], "outputs": ["all checks passed"]}},
        "grading": {"01_roofline_vector_add": {"solution": {"autograde_wall_s": 50.0, "scores": scores,
                                                            "why": {"a_correct": "right"}}},
                    "02_tiled_matmul": {}}}
    write_report(res, tmp_path)
    md = (tmp_path / "gpu_report.md").read_text()
    assert "Solution notebook: not executed in this run (--no-execute)." in md and "nan s" not in md
    assert "executed top to bottom: **121 s** (0 cells with errors)" in md and "| solution | 50 | 3 |" in md


def test_a_gpu_report_cut_short_keeps_the_students_graded_before(tmp_path, monkeypatch):
    # the device's calls are capped in time: a report killed mid-lesson must still hold what it graded
    import json
    from kernellab import gpu_report

    def two_then_killed(lesson, students, report, saved):
        report["solution"] = {"autograde_wall_s": 9.0, "scores": {"a_correct": 3.0}, "why": {"a_correct": "ok"}}
        saved()
        report["wrong"] = {"autograde_wall_s": 7.0, "scores": {"a_correct": 0.0}, "why": {"a_correct": "bad"}}
        saved()
        raise KeyboardInterrupt  # as a timeout's signal would end it
    monkeypatch.setattr(gpu_report, "grade_round_trip", two_then_killed)
    with pytest.raises(KeyboardInterrupt):
        gpu_report.main(str(tmp_path), bench=False, execute=False, lessons=["01_roofline_vector_add"])
    kept = json.loads((tmp_path / "gpu_report.json").read_text())["grading"]["01_roofline_vector_add"]
    assert set(kept) == {"solution", "wrong"}
    md = (tmp_path / "gpu_report.md").read_text()
    assert "| solution | 9 | 3 |" in md and "**wrong** lost: a_correct: bad" in md


def test_a_local_ray_node_that_starts_too_slowly_is_started_once_more(monkeypatch):
    # Ray gives a local node's raylet 30 s to register and raises otherwise; on a loaded machine that happened
    # once in CI. connect() tries a second time after that error, and only after that error.
    import subprocess
    import sys
    ray = pytest.importorskip("ray")
    from kernellab.grading.classroom import cluster
    calls, stops, started = [], [], []
    slow = Exception("The current node timed out during startup. This could happen because ...")

    def init(**kw):
        calls.append(kw)
        if len(calls) == 1:
            # as Ray's node does before it gives up: a server process of this process's, left running
            started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
            raise slow
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: stops.append(1))
    try:
        assert cluster.connect("local", 2) is True and len(calls) == 2 and stops == [1]
        assert not alive(started[0].pid)  # the failed start's process was stopped before the second start
    finally:
        for p in started:
            p.kill()
    calls.clear()

    def refused(**kw):
        calls.append(kw)
        raise ValueError("bad address")
    monkeypatch.setattr(ray, "init", refused)
    with pytest.raises(ValueError, match="bad address"):
        cluster.connect("local", 2)
    assert len(calls) == 1  # any other error is not retried


def test_notebook_sources_are_parsed_one_thread_at_a_time(monkeypatch):
    # CPython 3.11.5-3.11.7 (CI's) can raise "AST constructor recursion depth mismatch" when threads build ASTs at
    # once, and a regrade's thread pool parses notebooks in parallel (a clean-clone run failed so, 2026-11-26). The
    # race is rare, so this test watches how many parses overlap rather than waiting for it.
    import ast
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from kernellab.compat import parse_python
    inside, most, lock = [0], [0], threading.Lock()
    real = ast.parse

    def slow_parse(src, *a, **k):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.01)  # long enough for another thread to enter if nothing stops it
        try:
            return real(src, *a, **k)
        finally:
            with lock:
                inside[0] -= 1
    monkeypatch.setattr(ast, "parse", slow_parse)
    with ThreadPoolExecutor(4) as pool:
        trees = list(pool.map(parse_python, ["x = 1"] * 12))
    assert most[0] == 1 and all(isinstance(t, ast.Module) for t in trees)


def test_nbgrader_starts_without_torch_and_finds_every_preprocessor_it_is_given():
    """The course's nbgrader processes skip the IRI grammar and load a config that imports no kernellab (so
    generate, feedback and export do not import torch), and every preprocessor the config names by import path
    resolves to a class."""
    import subprocess

    from kernellab.paths import nbformat_python, repo_root, tool_env
    probe = ("import nbformat, sys\n"
             "from traitlets.config.loader import PyFileConfigLoader\nfrom traitlets.utils.importstring import import_item\n"
             "c = PyFileConfigLoader('nbgrader_config.py', path='.').load_config()\n"
             "print(sorted(m for m in ('torch', 'kernellab', 'rfc3987_syntax') if sys.modules.get(m) is not None))\n"
             "print([import_item(p).__name__ for p in c.Autograde.autograde_preprocessors])\n"
             "print([import_item(p).__name__ for p in c.Autograde.sanitize_preprocessors])\n")
    r = subprocess.run(nbformat_python(probe), cwd=repo_root() / "autograder", capture_output=True, text=True,
                       env=tool_env(), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    loaded, names, sanitize = r.stdout.splitlines()
    assert loaded == "[]"
    assert names.startswith("['LeaveUnrun', 'GradeOfRecord', ") and "SaveAutoGrades" in names
    assert sanitize.startswith("['OneSchemaVersion', 'ClearOutput', ") and "CheckCellMetadata" in sanitize


def test_a_notebook_with_a_huge_code_cell_is_refused_before_anything_parses_it():
    """Parsing a 1 MB cell for each of a lesson's problems cost the grading process 87 s (a red-team notebook):
    such a cell, or code over a million characters in all, is refused at once, for its own notebook only."""
    import time

    from nbformat.v4 import new_code_cell

    from kernellab.grading.judge import harness
    from kernellab.grading.instructor import submissions as S
    from kernellab.lessons import problems_of
    from kernellab.paths import repo_root
    L = "01_roofline_vector_add"
    nb = S.read(repo_root() / "solutions" / L / f"{L}.ipynb")
    assert harness.oversized_code(nb) is None
    nb.cells.append(new_code_cell("x = 1\n" * 200_000))
    t = time.monotonic()
    outcome, _ = harness.grade_problem(problems_of(L)["add_correct"], nb, 1, lesson=L)
    assert outcome.fraction == 0 and "more than the 200000" in outcome.message
    assert time.monotonic() - t < 5


def test_a_judge_asks_for_its_gpu_alone_only_once_warmed_up_and_runs_each_side_once_more_then():
    # What a judge holds its GPU alone for is the timing, not its setup (timing.untimed_runs, its `ready`).
    from types import SimpleNamespace

    from kernellab.timing import untimed_runs
    log = []
    problem = SimpleNamespace(baseline_setup=None, baseline=lambda *a: log.append("base"))
    base = untimed_runs(lambda *a: log.append("cand"), problem, [], lambda: log.append("ready"),
                        lambda: log.append("sync"))
    assert base is problem.baseline
    assert log == ["cand"] * 3 + ["sync", "base", "base", "sync", "ready", "cand", "base", "sync"]
    log.clear()  # no queue, nothing to ask: the warm-up alone
    assert untimed_runs(lambda *a: log.append("cand"), problem, [], None, lambda: None) is problem.baseline
    assert log == ["cand"] * 3 + ["base"] * 2


def test_points_and_the_lesson_come_from_the_course_never_from_the_submission(tmp_path):
    # A submitted test cell that claims 400 points for a 4-point problem is graded out of the course's points, and
    # a notebook whose file name names no lesson is not graded as whatever lesson its cells look like.
    import nbformat

    from kernellab.grading.judge.grade_one import lesson_of
    from kernellab.grading.judge.harness import course_points
    from kernellab.lessons import LESSONS, problems_of
    from kernellab.paths import repo_root
    for lesson in LESSONS:  # the solutions' points (the gradebook's) and the registered ones agree
        sol = nbformat.read(str(repo_root() / "solutions" / lesson / f"{lesson}.ipynb"), as_version=4)
        cells = {(c.metadata.get("nbgrader") or {}).get("grade_id"): c for c in sol.cells}
        for p in problems_of(lesson).values():
            assert course_points(p, lesson) == float(cells[p.id].metadata["nbgrader"]["points"]) == float(p.points)
    with pytest.raises(SystemExit, match="names no lesson"):
        lesson_of(tmp_path / "homework.ipynb")
    assert lesson_of(tmp_path / "alice_01_roofline_vector_add.ipynb") == "01_roofline_vector_add"


def test_a_submission_claiming_more_points_is_scored_out_of_the_courses(tmp_path):
    # The path every grading takes (kernellab grade, the queue, the store, nbgrader's plugin): grade_stored.
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from kernellab.grading.judge import harness
    from kernellab.grading.judge.store import Store
    from kernellab.lessons import problems_of
    from kernellab.problems.base import Outcome
    p = problems_of("01_roofline_vector_add")["add_correct"]
    forged = {"nbgrader": {"grade": True, "solution": False, "grade_id": "add_correct", "points": 400,
                           "schema_version": 3}}
    nb = new_notebook(cells=[new_code_cell("check()", metadata=forged), new_code_cell("check()", metadata=forged)])
    store = Store(tmp_path / "store")
    (score, most, _), reused = harness.grade_stored(
        p, nb, "01_roofline_vector_add", "mallory", b"secret", None, {}, {}, store=store,
        grade=lambda *a: (Outcome(p.id, 1.0, "right"), {}))
    assert (score, most, reused) == (p.points, p.points, False)
    (score, most, _), reused = harness.grade_stored(p, nb, "01_roofline_vector_add", "mallory", b"secret", None, {},
                                                    {}, store=store)
    assert (score, most, reused) == (p.points, p.points, True)  # the stored result says the same
    assert nbformat.validate(nb) is None


def test_nbgrader_writes_a_problems_score_into_one_test_cell_only(monkeypatch, tmp_path):
    # A submission that repeats a graded test cell (same grade_id) would otherwise score the problem twice.
    from nbformat.v4 import new_code_cell, new_notebook

    from kernellab.grading.instructor import nbgrader_plugin
    from kernellab.grading.judge import harness
    meta = {"nbgrader": {"grade": True, "solution": False, "grade_id": "add_correct", "points": 4}}
    nb = new_notebook(cells=[new_code_cell("check()", metadata=meta), new_code_cell("check()", metadata=meta)])
    monkeypatch.setattr(harness, "grade_notebook", lambda *a, **k: {"add_correct": (4.0, 4.0, "right")})
    (tmp_path / ".kernellab_secret").write_bytes(b"s")
    pre = nbgrader_plugin.GradeOfRecord(course_root=str(tmp_path), use_store=False)
    nb, _ = pre.preprocess(nb, {"nbgrader": {"assignment": "01_roofline_vector_add", "student": "s"}})
    first, second = nb.cells
    assert first.outputs[-1]["data"]["text/plain"] == "4"
    assert [o["output_type"] for o in second.outputs] == ["error"] and "scores 0" in second.outputs[0]["traceback"][0]
