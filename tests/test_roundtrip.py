"""The instructor's round trip, for real: nbgrader generate, autograde (grade of record in child
processes), feedback and export, with a sqlite gradebook in a temporary course folder."""
import json
import math
import re

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_raw_cell

from kernellab.grading.instructor import submissions as S
from kernellab.grading.instructor.dryrun import differs
from kernellab.lessons import problems_of
from roundtrip_checks import assert_blank_scores_zero, assert_solution_scores, new_course

L = "01_roofline_vector_add"
CORRECTNESS = {"answers_add": 2, "answers_matmul": 2, "add_correct": 4, "fused_correct": 3}
SPEED = {"add_bandwidth", "fused_speed"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    # the one round trip whose gradebook nbgrader makes itself, as in an instructor's first course
    course, rel, src, wrong = new_course(tmp_path_factory, L, fresh_gradebook=True)
    add = S.solution_texts(src)["add_code"]
    subs = {
        "solution": S.filled(rel, src),
        "blank": rel,
        "nomask": S.filled(rel, src, wrong["nomask"]),
        # monkeypatches every checker it can reach, with a wrong add
        "patcher": S.filled(rel, src, {"add_code": (
            "import math, torch\nimport kernellab.compare as kc\n"
            "torch.allclose = lambda *a, **k: True\nmath.isclose = lambda *a, **k: True\n"
            "kc.compare = lambda *a, **k: kc.Verdict(True, 0.0, '')\n" + add.replace("x + y", "x - y"))}),
        "exiter": S.filled(rel, src, wrong["exit_in_fused"]),
        "deleter": S.filled(rel, src, drop=("add_correct",)),
        "tamperer": _tampered(S.filled(rel, src, {"add_code": add.replace("x + y", "x - y")})),
    }
    subs["patcher"].cells.append(new_code_cell(MARKER_CELL))  # a plain cell, run by no worker: nbgrader's kernel?
    # Markup that would run in the instructor's formgrader session (InertMarkdown)
    subs["patcher"].cells += [new_markdown_cell(MARKUP), new_raw_cell(MARKUP, metadata={"raw_mimetype": "text/html"})]
    subs["patcher"].cells[-1]["id"] = 'x"><img src=x onerror="document.title=6">'  # ids go into the page's HTML
    # Another nbgrader schema version on one cell: nbgrader's error for it ended the whole autograde run, and no
    # student after "patcher" (solution, tamperer) was graded (a red-team notebook; OneSchemaVersion).
    next(c for c in subs["patcher"].cells if "nbgrader" in c.metadata).metadata.nbgrader["schema_version"] = 4
    # the LMS path of the README, then the instructor's CLI: kernellab term autograde / feedback / export (each
    # command's result kept in course.term_runs for the tests that read what it said: no second run of it)
    grades, scores = course.round_trip(L, subs, via_lms=("solution",), via_term=True)
    assert set(course.term_runs) == {("autograde", L), ("feedback", L), ("export",)}
    assert (course.ag / "submitted" / "solution" / L / f"{L}.ipynb").exists()
    return course, grades, scores


# nbgrader's autograde ran a submission's cells in a notebook kernel of its own, as the grading user, beside the
# course's secret, result store and gradebook: this cell would leave a file in autograder/ (the kernel's folder is
# autograded/<student>/<lesson>/) had it run there (grading/instructor/nbgrader_plugin.py, LeaveUnrun).
MARKER_CELL = ("import pathlib\n"
               "(pathlib.Path.cwd().parents[2] / 'ran_beside_the_gradebook').write_text('learner code ran here')\n")


MARKUP = ('**kept** answer <img src=x onerror="document.title=1"> <script>document.title=2</script> [a](javascript:alert(3)) '
          '<a href="jav&#x61;script:alert(4)">b</a>\n\n<div>\n\n[c](javascript:alert(5))\n\n</div>')
# MARKUP's handler inside a tag, its script element, its javascript: links (as escaped text they are fine; the
# templates' own handlers are not the learner's)
ACTIVE = re.compile(r"<[a-z]+[^<>]*\son\w+\s*=\s*\"?document|<script>document|<a[^<>]*href\s*=\s*\"?\s*jav", re.I)


def test_learner_markup_reaches_the_instructors_views_inert(graded):
    """The formgrader renders a submission's markdown unsanitized, in the instructor's session on the Jupyter
    server's origin; nbgrader's feedback page alike. The autograded copy holds only cleaned, inert HTML."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config
    course, _, _ = graded
    feedback = (course.ag / "feedback" / "patcher" / L / f"{L}.html").read_text()
    config = Config()  # the formgrader's exporter, as its app configures it
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    page, _ = HTMLExporter(config=config).from_filename(
        str(course.ag / "autograded" / "patcher" / L / f"{L}.ipynb"),
        resources={"assignment_id": L, "notebook_id": L, "submission_id": "s", "index": 0, "total": 1, "base_url": "",
                   "student": "patcher", "last_name": "", "first_name": "", "notebook_path": "p"})
    for html in (feedback, page):
        assert "answer" in html and "<strong>kept</strong>" in html  # the learner's text is still there
        assert not ACTIVE.search(html), ACTIVE.search(html)


def test_no_learner_cell_runs_in_nbgraders_process(graded):
    course, _, scores = graded
    assert not (course.ag / "ran_beside_the_gradebook").exists()
    assert scores["patcher"]["answers_add"] == scores["solution"]["answers_add"]


def _tampered(nb):
    """A wrong add whose test cell claims full points, another test cell printing NaN, a test cell and a
    solution cell with their nbgrader metadata stripped."""
    for c in nb.cells:
        gid = (c.metadata.get("nbgrader") or {}).get("grade_id")
        if gid == "add_correct":
            c.source = "print('all good')\n4"
        elif gid == "answers_add":
            c.source = "float('nan')"
        elif gid in ("answers_matmul", "silu_gate_code"):
            del c.metadata["nbgrader"]
    return nb


def test_tampered_test_cells_and_stripped_metadata_gain_and_lose_nothing(graded):
    course, _, scores = graded
    assert scores["tamperer"]["add_correct"] == 0  # the edited test cell is restored: the wrong add loses
    assert "wrong" in course.result(L, "tamperer", "add_correct")["why"].lower()
    for gid in ("answers_add", "answers_matmul", "fused_correct"):  # restored, and graded as the solution's
        assert scores["tamperer"][gid] == scores["solution"][gid], gid


def test_solution_scores_every_correctness_point_and_no_speed_on_cpu(graded):
    course, grades, scores = graded
    assert_solution_scores(course, grades, scores, L, CORRECTNESS, SPEED)


def test_blank_release_scores_zero_without_crashing(graded):
    course, _, scores = graded
    assert_blank_scores_zero(course, scores, L, ("add_correct",))


def test_masked_tail_bug_loses_exactly_that_problem(graded):
    _, _, scores = graded
    assert differs(scores["solution"], scores["nomask"]) == {"add_correct"}


def test_monkeypatching_checkers_gains_nothing(graded):
    course, _, scores = graded
    assert scores["patcher"]["add_correct"] == 0
    assert "replaces torch.allclose" in course.result(L, "patcher", "add_correct")["why"]
    assert differs(scores["solution"], scores["patcher"]) == {"add_correct"}


def test_os_exit_in_one_problem_leaves_the_others_graded(graded):
    course, _, scores = graded
    assert scores["exiter"]["fused_correct"] == 0
    assert "died" in course.result(L, "exiter", "fused_correct")["why"]
    for gid in ("answers_add", "answers_matmul", "add_correct"):
        assert scores["exiter"][gid] == scores["solution"][gid]


def test_deleted_test_cell_is_restored_and_graded(graded):
    _, _, scores = graded
    assert scores["deleter"]["add_correct"] == 4
    assert scores["deleter"] == scores["solution"]


def test_result_json_audit_record(graded):
    course, _, _ = graded
    for gid, p in problems_of(L).items():
        r = course.result(L, "solution", gid)
        for key in ("seed", "score", "max_points", "why", "environment", "started", "finished"):
            assert key in r, (gid, key)
        assert math.isfinite(r["score"]) and 0 <= r["score"] <= r["max_points"]
        assert r["environment"]["torch"] and r["environment"]["triton"] and r["environment"]["device"]["name"]
    assert "shapes" in course.result(L, "solution", "add_correct")


def test_feedback_has_reasons_but_no_seed_or_hidden_tests(graded):
    course, _, _ = graded
    html = (course.ag / "feedback" / "nomask" / L / f"{L}.html").read_text()
    assert "Grade of record" in html and "wrote past the end" in html
    assert "HIDDEN" not in html
    for gid in problems_of(L):
        seed = course.result(L, "nomask", gid)["seed"]
        assert str(seed) not in html
    secret = (course.ag / ".kernellab_secret").read_text().strip()
    assert secret not in html


def test_nothing_reaches_stderr_in_graded_cells(graded):
    course, _, _ = graded
    nb = json.loads((course.ag / "autograded" / "solution" / L / f"{L}.ipynb").read_text())
    for c in nb["cells"]:
        if c.get("metadata", {}).get("nbgrader", {}).get("grade") and c["cell_type"] == "code":
            assert not [o for o in c["outputs"] if o.get("name") == "stderr"]
            assert [o for o in c["outputs"] if o["output_type"] == "execute_result"]


def test_preflight_names_missing_cells_and_broken_rules(graded):
    from kernellab.grading.instructor import term
    rows = {r["student"]: r for r in term.preflight(graded[0].ag, L)}
    assert rows["solution"]["ok"] and rows["solution"]["gpu"] == "not run by the learner"
    assert rows["deleter"]["missing"] == ["add_correct"] and not rows["deleter"]["ok"]
    assert any("replaces torch.allclose" in b for b in rows["patcher"]["rules"])
    assert "answers_matmul" in rows["tamperer"]["missing"]  # its metadata was stripped
    out = graded[0].term("preflight", L)
    assert out.returncode == 1 and "deleter" in out.stdout and "missing add_correct" in out.stdout


def test_speed_graded_without_a_gpu_is_flagged_not_silently_lost(graded):
    """CI grades without a GPU: the speed problems score 0, and nbgrader's gradebook marks them as needing a grade
    (the formgrader lists them), the feedback says the 0 is a placeholder, and term export counts their points in
    a column of their own."""
    from nbgrader.api import Gradebook
    course, _, scores = graded
    with Gradebook(f"sqlite:///{course.ag / 'gradebook.db'}", "kernellab") as gb:
        grades = {g.name: g for g in gb.find_submission_notebook(L, L, "solution").grades}
        assert all(grades[gid].needs_manual_grade for gid in SPEED)
        assert not any(grades[gid].needs_manual_grade for gid in CORRECTNESS)
        gb.add_assignment("02_tiled_matmul")  # in the gradebook, submitted by no one: not in grades.csv
    html = (course.ag / "feedback" / "solution" / L / f"{L}.html").read_text()
    assert "this 0 is a placeholder" in html
    out = course.term("export")
    assert out.returncode == 0, out.stderr[-2000:]
    path = course.ag / "grades.csv"
    assert f"wrote {path}" in out.stdout and "left out (no submissions): 02_tiled_matmul" in out.stdout
    import csv
    rows = {r["student_id"]: r for r in csv.DictReader(open(path))}
    assert {r["assignment"] for r in csv.DictReader(open(path))} == {L}
    assert float(rows["solution"]["awaiting_gpu"]) == sum(problems_of(L)[gid].points for gid in SPEED)
    assert float(rows["solution"]["score"]) == sum(CORRECTNESS.values())  # nbgrader's own score is unchanged


def test_term_feedback_says_where_it_wrote_and_its_lines_wrap(graded):
    course, _, scores = graded
    out = course.term_runs[("feedback", L)]  # the fixture's own `kernellab term feedback`, after its autograde
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"wrote {len(scores)} feedback pages" in out.stdout and str(course.ag.resolve() / "feedback") in out.stdout
    html = (course.ag / "feedback" / "nomask" / L / f"{L}.html").read_text()
    assert "white-space: pre-wrap" in html  # the grade-of-record paragraph wraps at the page's edge
    # nbgrader's score output (the test cell's execute_result, "Out[ ]: 4") stays in the autograded notebook and
    # off the page: the paragraph above it already says "4 / 4"
    assert "Out[" not in html and "jp-OutputArea-executeResult" not in html


def test_fingerprint_of_a_notebook_the_learner_ran():
    import nbformat

    from kernellab.grading.instructor.term import fingerprints
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("kl.setup()", outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text="NVIDIA T4 (sm_75) | torch 2.9.0 | triton 3.5.0\nbf16: no\n")])])
    assert fingerprints(nb) == ["NVIDIA T4 (sm_75) | torch 2.9.0 | triton 3.5.0"]


def test_report_plots_pass_rates_from_the_audit_records(graded, tmp_path):
    from kernellab.grading.instructor import term
    per = term.report(graded[0].ag, L, tmp_path / "r.html")
    scores = graded[2]
    assert per["add_correct"]["n"] == len(scores)  # one audit record per student and problem
    assert per["add_correct"]["full"] == sum(s["add_correct"] == 4 for s in scores.values())
    html = (tmp_path / "r.html").read_text()
    assert html.count("<img") >= 1 and "add_correct" in html and "Pass rate per problem" in html

