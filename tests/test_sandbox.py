"""A worker confined by Landlock (grading/processes/sandbox.py) reaches only its own folders: not the judge's folder beside
it, not the course (secret, solutions), not another process's /proc entry, no signal outside its own processes and
no TCP; and a submission that signals every process it can (kill(-1)) ends nothing of the grading."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kernellab.grading.processes import sandbox
from kernellab.grading.instructor import submissions as S
from kernellab.paths import repo_root, tool_env

needs_landlock = pytest.mark.skipif(sandbox.abi() < 6, reason="needs Landlock ABI 6 (Linux 6.12): signal scoping")

# What a probe tried, and how it ended: "allowed", or the error (the probes' shared part, put in by format).
ATTEMPTS = textwrap.dedent('''
    seen = {"how": how}
    def attempt(name, f):
        try:
            f()
            seen[name] = "allowed"
        except OSError as exc:
            seen[name] = type(exc).__name__
''').strip("\n")

PROBE = textwrap.dedent('''
    import json, os, socket, sys
    sys.path.insert(0, {package!r})
    from kernellab.grading.processes.sandbox import confine
    base, secret = sys.argv[1], sys.argv[2]
    how = confine([os.path.join(base, "worker")], [base, {root!r}])
    {attempts}
    attempt("own_folder", lambda: open(os.path.join(base, "worker", "x"), "w").write("x"))
    attempt("judge_read", lambda: open(os.path.join(base, "judge", "cases.pt")).read())
    attempt("judge_write", lambda: open(os.path.join(base, "judge", "judged.pt"), "w").write("x"))
    attempt("secret", lambda: open(secret).read())
    attempt("solutions", lambda: os.listdir({solutions!r}))
    attempt("parent_environ", lambda: open(f"/proc/{{os.getppid()}}/environ").read())
    attempt("own_status", lambda: open("/proc/self/status").read())
    attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
    attempt("tcp", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))
    print(json.dumps(seen))
''')


@needs_landlock
def test_a_confined_process_reaches_only_its_own_folders(tmp_path):
    base = tmp_path / "kl-grade"
    (base / "worker").mkdir(parents=True)
    (base / "judge").mkdir()
    (base / "judge" / "cases.pt").write_text("the secret inputs")
    secret = tmp_path / "course" / ".kernellab_secret"
    secret.parent.mkdir()
    secret.write_text("s3cret")
    root = repo_root()
    probe = PROBE.format(package=str(root / "autograder"), root=str(root), solutions=str(root / "solutions"),
                         attempts=ATTEMPTS)
    r = subprocess.run([sys.executable, "-c", probe, str(base), str(secret)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "KERNELLAB_SECRET": "in-the-environment"})
    assert r.returncode == 0, r.stderr[-2000:]
    seen = json.loads(r.stdout.splitlines()[-1])
    assert seen.pop("how").startswith("landlock ABI")
    assert seen == {"own_folder": "allowed", "own_status": "allowed", "judge_read": "PermissionError",
                    "judge_write": "PermissionError", "secret": "PermissionError", "solutions": "PermissionError",
                    "parent_environ": "PermissionError", "signal_parent": "PermissionError",
                    "tcp": "PermissionError"}


def test_library_folders_never_open_the_course_or_a_folder_above_it(tmp_path):
    """PYTHONPATH=autograder puts the folder of the secret and the gradebook on sys.path: only the package inside
    it is granted; a folder above a protected one (/, the temporary folder) is never granted."""
    root = str(repo_root())
    folders = sandbox.library_folders([root, str(tmp_path)])
    assert str(repo_root() / "autograder" / "kernellab") in folders
    assert str(repo_root() / "autograder") not in folders and root not in folders
    assert not any(os.path.realpath(str(tmp_path)).startswith(f.rstrip("/") + "/") for f in folders)


@needs_landlock
def test_killing_every_process_it_can_stops_no_grading(tmp_path):
    """kill(-1, SIGKILL) from a learner's cell: unconfined, it ends every process of the grading user (the grader,
    nbgrader, the instructor's session); confined, only processes the worker started."""
    rel = S.read(repo_root() / "notebooks" / "01_roofline_vector_add" / "01_roofline_vector_add.ipynb")
    src = S.read(repo_root() / "solutions" / "01_roofline_vector_add" / "01_roofline_vector_add.ipynb")
    add = S.solution_texts(src)["add_code"]
    attack = "import operator\n\noperator.attrgetter('os')(torch).kill(-1, 9)  # every process it may signal\n\n"
    nb_path = tmp_path / "killer.ipynb"
    S.write(S.filled(rel, src, {"add_code": attack + add}), nb_path)
    (tmp_path / "secret").write_text("a course secret")
    out = tmp_path / "out.json"
    r = subprocess.run([sys.executable, "-m", "kernellab.cli", "grade", str(nb_path), "--lesson", "01_roofline_vector_add", "--problems",
                        "add_correct,fused_correct,answers_add", "--json", str(out), "--secret-file",
                        str(tmp_path / "secret")], capture_output=True, text=True, timeout=600, env=tool_env(),
                       cwd=tmp_path, start_new_session=True)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    got = json.loads(out.read_text())["problems"]
    # Linux spares the sender itself: the worker goes on, the kill reached nothing else, every problem is graded
    assert (got["add_correct"]["points"], got["fused_correct"]["points"], got["answers_add"]["points"]) == (4, 3, 2)


def test_the_grader_reads_a_workers_folder_without_following_what_it_planted(tmp_path):
    """A worker may replace anything in its own folder before it ends: a link to the course secret, a named pipe
    (whose read would block forever), a link to /dev/zero among its kernel files, a link under an answer's name.
    The grading process follows none of them (grading/judge/worker_files.py; a red-team worker, 2026-11-27, got the
    secret into the grading record through its log, and hung the grading with a pipe)."""
    from kernellab.grading.judge import worker_files as W
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    work = tmp_path / "worker"
    (work / "kernels").mkdir(parents=True)
    os.symlink(secret, work / "child.log")
    os.mkfifo(work / "phase")
    assert W.tail(work / "child.log") == "" and W.tail(work / "phase") == ""
    for path in (work / "child.log", work / "phase"):
        with pytest.raises(OSError):
            W.read_bytes(path, 100)
    (work / "kernels" / "k.cubin").write_bytes(b"\x7fELF" + b"x" * 100)
    (work / "kernels" / "big.json").write_bytes(b"{}" * 100)
    os.symlink("/dev/zero", work / "kernels" / "zero")
    os.symlink(secret, work / "kernels" / "k.json")
    os.mkfifo(work / "kernels" / "pipe")
    W.copy_regular_files(work / "kernels", tmp_path / "judge", limit_each=150)
    assert sorted(os.listdir(tmp_path / "judge")) == ["k.cubin"]  # big.json is over the limit
    os.symlink(secret, work / "go")
    with pytest.raises(FileExistsError):
        W.write_new(work / "go", "go")
    assert secret.read_text() == "s3cret"
    W.write_new(work / "fresh", "go")
    assert (work / "fresh").read_text() == "go"


JUDGE_PROBE = textwrap.dedent('''
    import json, os, sys
    sys.path.insert(0, {package!r})
    from kernellab.grading.processes.sandbox import confine_job
    base = sys.argv[1]
    how = confine_job(os.path.join(base, "judge"))
    {attempts}
    attempt("own_cases", lambda: open(os.path.join(base, "judge", "cases.pt")).read())
    attempt("own_result", lambda: open(os.path.join(base, "judge", "judged.pt"), "w").write("x"))
    attempt("worker_folder", lambda: os.listdir(os.path.join(base, "worker")))
    attempt("solutions", lambda: os.listdir({solutions!r}))
    attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
    print(json.dumps(seen))
''')


@needs_landlock
def test_a_judge_that_interprets_kernels_is_confined_to_its_job_folder(tmp_path):
    """An interpreting judge runs each recorded kernel's body as Python (what passed the purity check): it is
    confined as a worker is (sandbox.confine_job), so a body that got past the check reads neither the worker's
    folder beside it nor the course, and signals nothing. A real grading's judge says so in the record."""
    from kernellab.grading.judge import harness
    from kernellab.lessons import problems_of
    base = tmp_path / "kl-grade"
    (base / "worker").mkdir(parents=True)
    (base / "judge").mkdir()
    (base / "judge" / "cases.pt").write_text("the inputs")
    root = repo_root()
    probe = JUDGE_PROBE.format(package=str(root / "autograder"), solutions=str(root / "solutions"),
                               attempts=ATTEMPTS)
    r = subprocess.run([sys.executable, "-c", probe, str(base)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    seen = json.loads(r.stdout.splitlines()[-1])
    assert seen.pop("how").startswith("landlock ABI")
    assert seen == {"own_cases": "allowed", "own_result": "allowed", "worker_folder": "PermissionError",
                    "solutions": "PermissionError", "signal_parent": "PermissionError"}
    lesson = "01_roofline_vector_add"
    src = S.read(root / "solutions" / lesson / f"{lesson}.ipynb")
    outcome, record = harness.grade_problem(problems_of(lesson)["add_correct"], src, 1234, lesson=lesson)
    assert outcome.fraction == 1.0, outcome.message
    assert record["judge_sandbox"].startswith("landlock ABI"), record["judge_sandbox"]
