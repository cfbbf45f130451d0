"""nbgrader wiring: the grade of record lands in the test cells' outputs, so the gradebook,
formgrader, feedback and export stay nbgrader's own.

- ``SafeExecute``: nbgrader's Execute, except that the test cells of registered problems are
  not run in the learner's kernel (the harness grades them) and a kernel that dies does not
  fail the whole notebook.
- ``GradeOfRecord``: runs every registered problem through the harness and writes into its
  test cell a stdout paragraph (why) and the clamped score (what nbgrader records). Results already in
  the course's result store (``autograder/grading_store/``, filled by ``kernellab term autograde``'s queue)
  are taken from there instead of being graded again.
"""
from __future__ import annotations

import os
import pathlib

from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Unicode

from ..notebook_cells import grade_id, graded_test_id


def _registered(lesson: str) -> dict:
    from ..lessons import LESSONS, problems_of
    return problems_of(lesson) if lesson in LESSONS else {}


def _measurement_cells(lesson: str) -> set:
    """Read-only cells that only time, plot or explore (sweeps, rooflines, ungraded checks): they grade
    nothing, and on a GPU they would add minutes per submission, so autograde leaves them out."""
    from ..lessons import LESSONS, lesson_module
    return set(getattr(lesson_module(lesson), "MEASUREMENT_CELLS", ())) if lesson in LESSONS else set()


class SafeExecute(Execute):
    def preprocess(self, nb, resources):
        lesson = resources.get("nbgrader", {}).get("assignment", "")
        self._kl_problems = _registered(lesson)
        self._kl_skip = _measurement_cells(lesson)
        try:
            return super().preprocess(nb, resources)
        except Exception as exc:  # noqa: BLE001 - e.g. DeadKernelError: keep what ran, grade the rest
            self.log.warning("The notebook's kernel stopped (%s: %s); graded problems run in their own "
                             "processes and are still graded.", type(exc).__name__, exc)
            for cell in nb.cells:
                if cell.cell_type == "code" and not cell.get("outputs") and not graded_test_id(cell):
                    cell.outputs = [new_output("stream", name="stdout",
                                               text="(not run: the notebook's kernel had stopped)\n")]
            return nb, resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and graded_test_id(cell) in getattr(self, "_kl_problems", {}):
            cell.outputs = []
            return cell, resources  # graded in a separate process by GradeOfRecord
        if cell.cell_type == "code" and grade_id(cell) in getattr(self, "_kl_skip", ()):
            cell.outputs = [new_output("stream", name="stdout", text="(a measurement cell: not run while grading)\n")]
            return cell, resources
        return super().preprocess_cell(cell, resources, index)


class GradeOfRecord(NbGraderPreprocessor):
    logs_dir = Unicode("", help="Where result.json files go (per student/lesson/problem).").tag(config=True)
    course_root = Unicode("", help="Course root; holds .kernellab_secret.").tag(config=True)
    use_store = Bool(True, help="Take results from the result store and store new ones.").tag(config=True)
    store_dir = Unicode("", help="The result store (default <course_root>/grading_store).").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        lesson, student = info.get("assignment", ""), info.get("student", "unknown")
        problems = _registered(lesson)
        if not problems:
            return nb, resources
        from .harness import grade_notebook
        from .secret import course_secret

        root = self.course_root or os.getcwd()
        logs = self.logs_dir or str(pathlib.Path(root) / "grading_logs")
        store = None
        if self.use_store:
            from .store import STORE_DIR, Store
            store = Store(self.store_dir or pathlib.Path(root) / STORE_DIR)
        results = grade_notebook(nb, lesson, student, course_secret(root), logs_dir=logs, store=store)
        for cell in nb.cells:
            gid = graded_test_id(cell)
            if gid not in results:
                continue
            score, points, why = results[gid]
            mark = "✓" if score >= points else ("◐" if score > 0 else "✗")
            cell.outputs = [
                new_output("stream", name="stdout", text=f"{mark} Grade of record: {score:g} / {points:g}. {why}\n"),
                new_output("execute_result", data={"text/plain": f"{score:g}"}, execution_count=None),
            ]
        return nb, resources
