"""A newcomer's first day (issue 54): each friction found on a fresh clone, with the check that would have caught
it. The instructor's commands run from autograder/ are in test_roundtrip.py (preflight, feedback, export);
the class report and its similarity table in test_similarity.py. Runtime: ~5 s (one kernel in the interpreter)."""
import pathlib
import re
import subprocess
import tomllib

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the README
def test_readme_is_short_and_names_every_page_it_points_to():
    readme = (ROOT / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) < 150
    # link definitions ([l01]: https://...) hold a whole URL; every line a reader reads is short
    long = [line for line in lines if len(line) > 120 and not re.match(r"^\[[^\]]+\]: https?://", line)]
    assert not long, long
    for page in ("docs/INSTRUCTOR.md", "docs/GRADE_OF_RECORD.md", "docs/PERFORMANCE.md", "docs/ARCHITECTURE.md"):
        assert page in readme and (ROOT / page).exists(), page
    from kernellab._meta import colab_url
    for coming in ("09_serve_it", "10_mixture_of_experts"):  # lessons being written: rows already there
        assert colab_url(coming) in readme
    assert not re.search(r"20\d\d-\d\d-\d\d", readme), "dated measurements belong in docs/PERFORMANCE.md"


def test_instructor_guide_names_each_command_with_its_folder():
    guide = (ROOT / "docs" / "INSTRUCTOR.md").read_text()
    for command in ("kernellab term preflight", "kernellab term autograde", "kernellab term feedback",
                    "kernellab term export", "kernellab term report", "nbgrader zip_collect", "kernellab build",
                    "bash scripts/setup.sh"):
        assert command in guide, command
    assert "cd autograder" in guide and "without a GPU" in guide and "needs manual grade" in guide


# ---------------------------------------------------------------- the learner's install
def test_learner_install_has_no_instructor_or_test_tools():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    learner = {re.split(r"[<>=!~ \[]", d)[0] for d in extras["course"]}
    assert not learner & {"nbgrader", "ray", "playwright", "pytest", "pytest-xdist", "nbclient"}, learner
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    roles = dict(re.findall(r"^\s*(\w+)\) extras=([\w,]+) ;;", setup, re.M))
    assert roles == {"learner": "course", "instructor": "instructor", "test": "instructor,test"}, roles
    assert re.search(r"^bash scripts/setup.sh learner\b", (ROOT / "scripts" / "start.sh").read_text(), re.M)
    assert re.search(r"^bash scripts/setup.sh test\b", (ROOT / "scripts" / "test.sh").read_text(), re.M)
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_roofline_points_stay_with_the_checkout(monkeypatch, tmp_path):
    from kernellab import roofline
    from kernellab.paths import repo_root
    monkeypatch.delenv("KERNELLAB_CACHE", raising=False)
    f = roofline._points_file()
    assert f.is_relative_to(repo_root()) and not f.is_relative_to(pathlib.Path.home() / ".cache")
    # kernellab installed outside a checkout (Colab's pip install): beside the notebook
    monkeypatch.setattr("kernellab.paths.repo_root", lambda: tmp_path / "site-packages")
    monkeypatch.chdir(tmp_path)
    assert roofline._points_file() == tmp_path / ".kernellab" / "roofline-points.json"


def test_what_grading_writes_is_git_ignored():
    for path in ("autograder/reports/01_roofline_vector_add.html", ".kernellab/roofline-points.json",
                 "autograder/grades.csv", "autograder/feedback/ann/x.html"):
        r = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
        assert r.returncode == 0, f"{path} is not git-ignored"


# ---------------------------------------------------------------- feedback that teaches
def test_fp16_math_function_gets_a_hint_and_the_kernel_line():
    import triton
    import triton.language as tl

    from kernellab.invoke import describe_exception

    @triton.jit
    def sigmoid_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, tl.sigmoid(x), mask=offs < n)

    x = torch.randn(10, dtype=torch.float16)
    with pytest.raises(Exception) as info:
        sigmoid_kernel[(1,)](x, torch.empty_like(x), 10, BLOCK=16)
    said = describe_exception(info.value, "silu(x)")
    assert "given fp16 values" in said and "x.to(tl.float32)" in said and "tl.sigmoid(x)" in said, said
    assert "InterpreterError" not in said


def test_infinite_output_is_called_an_overflow_only_where_it_can_be_one():
    from kernellab.compare import compare
    ref = torch.randn(64, dtype=torch.float64)
    out = ref.half()
    out[5] = float("inf")  # a K tail summed without its mask: the right values are small
    said = compare(out, ref).message
    assert "mask" in said and "Compute in float32" not in said, said
    big = torch.full((8,), 60000.0, dtype=torch.float64)  # the right values near fp16's largest
    out = big.half()
    out[0] = float("inf")
    assert "Compute in float32" in compare(out, big).message


def test_answer_hints_teach_the_method_not_the_number():
    from kernellab.learner import facts
    from kernellab.lessons import LESSONS, problems_of
    from kernellab.problems.base import AnswersProblem
    seen = 0
    for lesson in LESSONS:
        for p in problems_of(lesson).values():
            if not isinstance(p, AnswersProblem) or p.measure is not None or lesson.startswith("07"):
                continue
            for a in p.answers(facts()):
                seen += 1
                # a formula (3 x 2, N^3/32, B * H * N) or the number itself hands the answer out
                assert not re.search(r"\d\s*x\s*\d|\^|\w\s*\*\s*\w|\d\s*/\s*\d", a.explain), (a.name, a.explain)
                if not isinstance(a.expected, str):
                    assert f"{a.expected:g}" not in a.explain and str(a.expected) not in a.explain, a.name
    assert seen >= 20


def test_an_answer_computed_from_a_wrong_one_is_told_so(capsys):
    from kernellab.lessons import lesson_module
    from kernellab.learner import VERDICTS
    L = lesson_module("01_roofline_vector_add")
    n = 1 << 24
    L.check_answers_add(2 * 2 * n, n, 1 / 4, "memory")  # bytes wrong; intensity = their FLOPs / their bytes
    said = capsys.readouterr().out
    assert "It does follow from your ADD_BYTES" in said
    assert VERDICTS["answers_add"]["fraction"] == 0.5  # said, not scored: the intensity is still not right
    L.check_answers_add(2 * 2 * n, n, 1 / 9, "memory")  # an intensity that follows from nothing
    assert "follow" not in capsys.readouterr().out


def test_checks_return_nothing_to_show_under_the_cell():
    """A check's result showed as a stray ``Out[ ]: 1`` (partial credit's number) under the check cell."""
    from kernellab.lessons import lesson_module
    L = lesson_module("01_roofline_vector_add")
    n = 1 << 24
    assert L.check_answers_add(3 * 2 * n, n, 1 / 6, "compute") is None  # partial
    assert L.check_answers_add(3 * 2 * n, n, 1 / 6, "memory") is None  # full


# ---------------------------------------------------------------- grading without a GPU
def test_grading_without_a_gpu_says_so_loudly_and_first():
    from kernellab.device import DEVICE
    from kernellab.grading.instructor.term import gpu_notice
    if DEVICE.on_gpu:
        pytest.skip("this machine has a GPU")
    notice = gpu_notice("01_roofline_vector_add")
    assert "add_bandwidth" in notice and "fused_speed" in notice and "(4 of 15 points)" in notice
    assert "needing a manual grade" in notice
