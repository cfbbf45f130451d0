"""A whole instructor round trip in a throw-away course folder: generate, submit, autograde,
feedback, export. Used by the tests (CPU) and by the GPU run that times grading."""
from __future__ import annotations

import csv
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from kernellab.paths import repo_root, tool_env
from kernellab.grading.instructor import submissions as S
from kernellab.grading.instructor.term import nbgrader as run_nbgrader


class Course:
    def __init__(self, root: pathlib.Path | None = None):
        src = repo_root()
        self.root = pathlib.Path(root or tempfile.mkdtemp(prefix="kl-course-"))
        shutil.copytree(src / "solutions", self.root / "solutions", dirs_exist_ok=True)
        (self.root / "autograder").mkdir(exist_ok=True)
        shutil.copy(src / "autograder" / "nbgrader_config.py", self.root / "autograder" / "nbgrader_config.py")
        self.ag = self.root / "autograder"
        self.term_runs: dict = {}  # round_trip(via_term=True): each `kernellab term` command's result

    def nbgrader(self, *args, check=True, timeout=3600) -> subprocess.CompletedProcess:
        r = run_nbgrader(self.ag, *args, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"nbgrader {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n"
                               f"{r.stderr[-3000:]}")
        return r

    def generate(self, lesson: str) -> None:
        self.nbgrader("generate_assignment", lesson, "--force")

    def release_nb(self, lesson: str):
        return S.read(self.root / "notebooks" / lesson / f"{lesson}.ipynb")

    def source_nb(self, lesson: str):
        return S.read(self.root / "solutions" / lesson / f"{lesson}.ipynb")

    def submit(self, lesson: str, student: str, nb) -> pathlib.Path:
        d = self.ag / "submitted" / student / lesson
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{lesson}.ipynb"
        S.write(nb, p)
        return p

    def collect_from_lms(self, lesson: str, files: dict) -> None:
        """Put LMS downloads (student -> notebook) where zip_collect looks, named <student>_<lesson>.ipynb,
        and run ``nbgrader zip_collect``."""
        archive = self.ag / "downloaded" / lesson / "archive"
        archive.mkdir(parents=True, exist_ok=True)
        for student, nb in files.items():
            S.write(nb, archive / f"{student}_{lesson}.ipynb")
        self.nbgrader("zip_collect", lesson, "--force")

    def autograde(self, lesson: str, student: str | None = None) -> float:
        t0 = time.monotonic()
        args = ["autograde", lesson, "--force"] + ([f"--student={student}"] if student else [])
        self.nbgrader(*args)
        return time.monotonic() - t0

    def feedback(self, lesson: str) -> None:
        self.nbgrader("generate_feedback", lesson, "--force")

    def export(self) -> dict:
        """{student: {assignment: score}} from grades.csv written by ``nbgrader export``."""
        self.nbgrader("export")
        rows = list(csv.DictReader(open(self.ag / "grades.csv")))
        out = {}
        for r in rows:
            out.setdefault(r["student_id"], {})[r["assignment"]] = float(r["score"])
        return out

    def cell_scores(self, lesson: str, student: str) -> dict:
        """grade_id -> auto score, read from the gradebook."""
        from nbgrader.api import Gradebook
        with Gradebook(f"sqlite:///{self.ag / 'gradebook.db'}", "kernellab") as gb:
            sub = gb.find_submission_notebook(lesson, lesson, student)
            return {g.name: g.auto_score for g in sub.grades}

    def term(self, *args) -> subprocess.CompletedProcess:
        """``kernellab term ...`` as the README has an instructor type it: from autograder/, with no --course
        (the default "."; with an absolute --course, as this ran before, a crash of the default went unseen)."""
        return subprocess.run([sys.executable, "-m", "kernellab.cli", "term", *args],
                              cwd=self.ag, capture_output=True, text=True, env=tool_env(), timeout=3600)

    def round_trip(self, lesson: str, subs: dict, via_lms: tuple = (), via_term: bool = False) -> tuple[dict, dict]:
        """The instructor's whole pass: collect (``via_lms`` students through zip_collect, the rest
        submitted directly), autograde, feedback, export. Returns (grades.csv rows, cell scores).
        ``via_term``: autograde, feedback and export through ``kernellab term``, each command's result kept in
        ``term_runs`` (keyed by its arguments) for what a test reads of its output."""
        if via_lms:
            self.collect_from_lms(lesson, {s: subs[s] for s in via_lms})
        for student, nb in subs.items():
            if student not in via_lms:
                self.submit(lesson, student, nb)
        if via_term:
            for args in (("autograde", lesson), ("feedback", lesson), ("export",)):
                r = self.term_runs[args] = self.term(*args)
                if r.returncode != 0:
                    raise RuntimeError(f"kernellab term {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        else:
            self.autograde(lesson)
            self.feedback(lesson)
        return self.export(), {s: self.cell_scores(lesson, s) for s in subs}

    def result(self, lesson: str, student: str, problem: str) -> dict:
        import json
        return json.loads((self.ag / "grading_logs" / student / lesson / problem / "result.json").read_text())


def differs(reference: dict, scores: dict) -> set:
    """The problems (grade_ids) where ``scores`` is not what ``reference`` got, up or down."""
    return {g for g in reference if scores.get(g) != reference[g]}
