"""nbgrader wiring: the grade of record lands in the test cells' outputs, so the gradebook,
formgrader, feedback and export stay nbgrader's own.

- ``LeaveUnrun``: in place of nbgrader's Execute. Autograde runs none of the learner's code in the
  notebook's own kernel: that kernel would be the learner's code, as the grading user, beside the course's
  secret, the result store and the gradebook, with nothing between (a cell could write a stored result for its
  own notebook, which GradeOfRecord then takes, or change another student's grades). Every code cell is left
  without outputs; a graded test cell that no problem of the course grades gets an error output (0 points,
  with the reason), so nothing scores for not having run.
- ``OneSchemaVersion``: first of autograde's sanitizing steps, it sets every cell's nbgrader ``schema_version``
  to the one this nbgrader writes. A submission with another (a red-team notebook, 2026-11-27: 4 on a markdown
  cell; an older toolbar writes less) made nbgrader raise an error that ends the whole autograde run, so no
  student after it was graded. The cell's fields are still checked against the schema, per student. A cell id
  outside nbformat's pattern (they go into the formgrader's HTML: a red-team id held markup) is replaced by a
  fresh one: nbconvert validates the notebook after this step, and refused the whole notebook for it.
- ``InertMarkdown``: a sanitizing step before nbgrader restores the locked cells. The formgrader shows a
  submission as HTML from the Jupyter server's own origin, with the learner's markdown rendered unsanitized (its
  template has no clean_html; ``HTMLExporter.sanitize_html`` does not reach it): an ``<img onerror=...>`` in a
  markdown cell would run in the instructor's session, which can call the server's API (a terminal, a kernel)
  and rewrite the gradebook. Each markdown and raw cell the learner could write becomes the HTML it renders to,
  cleaned by an allow-list (bleach: text, formatting, tables, http(s) and mailto links), on one line inside a
  ``div`` that MathJax skips, so that no markdown renderer reads anything in it again; attachments are dropped.
- ``AwaitingGpu`` (after nbgrader's SaveAutoGrades): a problem this grading machine cannot grade (speed without a
  GPU, or lesson 08's on a GPU older than sm_90) is scored 0 by nbgrader like any other, so it is marked in the
  gradebook as needing a manual grade: the formgrader lists it, and ``kernellab term export`` counts its points
  apart, instead of the 0 reading as a lost point.
- ``GradeOfRecord``: runs every registered problem through the harness and writes into its
  test cell a stdout paragraph (why) and the clamped score (what nbgrader records). Results already in
  the course's result store (``autograder/grading_store/``, filled by ``kernellab term autograde``'s queue)
  are taken from there instead of being graded again.
"""
from __future__ import annotations

import os
import pathlib
import re
import uuid

from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Unicode

from kernellab.notebook_source import graded_test_id


def _registered(lesson: str) -> dict:
    from kernellab.lessons import LESSONS, problems_of
    return problems_of(lesson) if lesson in LESSONS else {}


class LeaveUnrun(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        lesson = resources.get("nbgrader", {}).get("assignment", "")
        problems = _registered(lesson)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            cell.outputs = []
            cell.execution_count = None
            gid = graded_test_id(cell)
            if gid and gid not in problems:
                cell.outputs = [new_output(
                    "error", ename="NotGraded", evalue=f"no problem of {lesson or 'this lesson'} grades `{gid}`",
                    traceback=[f"NotGraded: this test cell ({gid}) is not one the course grades; it scores 0."])]
        return nb, resources


# What a learner's markdown may render to in the instructor's views (InertMarkdown): no script, style, form,
# frame, event handler or non-web link.
SAFE_TAGS = {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "b", "i", "u", "s", "del", "code",
             "pre", "blockquote", "ul", "ol", "li", "a", "img", "table", "thead", "tbody", "tr", "th", "td", "span",
             "div", "sup", "sub", "dl", "dt", "dd"}
SAFE_ATTRIBUTES = {"a": ["href", "title"], "img": ["src", "alt", "title"], "th": ["align"], "td": ["align"]}
SAFE_PROTOCOLS = ["http", "https", "mailto"]


def inert_html(markdown: str, raw: bool = False) -> str:
    """``markdown`` (``raw``: a raw cell's text, shown as it is) as cleaned HTML that renders the same in any
    markdown renderer: one line, in a block no math typesetter reads."""
    import html

    import bleach
    from nbconvert.filters.markdown_mistune import markdown2html_mistune
    rendered = f"<pre>{html.escape(markdown)}</pre>" if raw else markdown2html_mistune(markdown)
    clean = bleach.clean(rendered, tags=SAFE_TAGS, attributes=SAFE_ATTRIBUTES, protocols=SAFE_PROTOCOLS, strip=True,
                         strip_comments=True)
    # A blank line would end the HTML block and hand the rest to the markdown renderer again.
    return '<div class="tex2jax_ignore mathjax_ignore">' + clean.replace("\r", "").replace("\n", "&#10;") + "</div>"


class InertMarkdown(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)  # widget state is written into the page as a script element's text
        for cell in nb.cells:
            if cell.cell_type == "code":
                continue
            cell.pop("attachments", None)
            cell.source = inert_html(cell.source, raw=cell.cell_type == "raw")
            if cell.cell_type == "raw":
                cell.cell_type = "markdown"
                cell.metadata.pop("raw_mimetype", None)
                cell.metadata.pop("format", None)
        return nb, resources


_CELL_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


class OneSchemaVersion(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        from nbgrader.nbgraderformat import SCHEMA_VERSION
        for cell in nb.cells:
            if "id" in cell and not (isinstance(cell["id"], str) and _CELL_ID.fullmatch(cell["id"])):
                cell["id"] = uuid.uuid4().hex[:8]  # nbconvert validates after this step and refused the notebook
            meta = (cell.get("metadata") or {}).get("nbgrader")
            if isinstance(meta, dict):
                meta["schema_version"] = SCHEMA_VERSION
        return nb, resources


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
        from kernellab.grading.judge.harness import grade_notebook
        from kernellab.grading.judge.secret import course_secret

        root = self.course_root or os.getcwd()
        logs = self.logs_dir or str(pathlib.Path(root) / "grading_logs")
        store = None
        if self.use_store:
            from kernellab.grading.judge.store import STORE_DIR, Store
            store = Store(self.store_dir or pathlib.Path(root) / STORE_DIR)
        results = grade_notebook(nb, lesson, student, course_secret(root), logs_dir=logs, store=store)
        written = set()
        awaiting = resources.setdefault("kernellab", {}).setdefault("awaiting_gpu", [])
        for cell in nb.cells:
            gid = graded_test_id(cell)
            if gid not in results:
                continue
            if gid in written:  # a second test cell claiming the same grade_id: one problem scores once
                cell.outputs = [new_output("error", ename="NotGraded", evalue=f"`{gid}` is graded once", traceback=[
                    f"NotGraded: another test cell of this notebook already holds `{gid}`; this copy scores 0."])]
                continue
            written.add(gid)
            score, points, why = results[gid]
            mark = "✓" if score >= points else ("◐" if score > 0 else "✗")
            cannot = problems[gid].not_gradable_here()
            if not score and cannot and cannot in why:  # not one that was unwritten or failed for another reason
                # Not a lost point but a problem this machine cannot grade: said so, and flagged by AwaitingGpu
                # so that nbgrader's formgrader lists it as needing a grade.
                awaiting.append(gid)
                mark = "◌"
                why = f"{why} {AWAITING_GPU}"
            cell.outputs = [
                new_output("stream", name="stdout", text=f"{mark} Grade of record: {score:g} / {points:g}. {why}\n"),
                new_output("execute_result", data={"text/plain": f"{score:g}"}, execution_count=None),
            ]
        return nb, resources


# What the learner's feedback says under a problem that this grading machine could not grade.
AWAITING_GPU = ("Not graded yet: this needs a GPU and was graded on a machine without one (or with an older one); "
                "your instructor grades it on a GPU, and this 0 is a placeholder until then.")


class AwaitingGpu(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        awaiting = (resources.get("kernellab") or {}).get("awaiting_gpu") or []
        if not awaiting:
            return nb, resources
        from nbgrader.api import Gradebook
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            for gid in awaiting:
                grade = gb.find_grade(gid, info["notebook"], info["assignment"], info["student"])
                grade.needs_manual_grade = True
            gb.db.commit()
        return nb, resources
