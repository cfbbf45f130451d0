"""Learner-side integrity: on one machine, the notebook's own check cells and the grade of record must
reach the same verdict on every problem of a correct submission.

    kernellab agree [--lessons 01_roofline_vector_add,...] [--jobs 8] [--out DIR]

For each lesson the solution notebook is executed top to bottom as a learner runs it (its check cells
record what they decided in kernellab.learner.VERDICTS), then every problem is graded once by the grade
of record (a fresh child process per problem, as nbgrader's autograde does). A problem agrees when both
give the same fraction of its points. Checks that cannot judge a problem on this machine (speed on a
CPU, reads counted only in the interpreter on a GPU) are listed as not judged, with the reason.
"""
from __future__ import annotations

import json
import pathlib


def compare(lesson: str, verdicts: dict, record: dict) -> list[dict]:
    """One row per problem: what the learner's check and the grade of record decided, and whether they agree.
    ``verdicts``: learner.VERDICTS after the notebook ran; ``record``: regrade's result with one grading."""
    from kernellab.lessons import problems_of
    rows = []
    for pid, p in problems_of(lesson).items():
        lv, rec = verdicts.get(pid), record.get(pid)
        row = {"lesson": lesson, "problem": pid, "points": p.points, "learner": None, "record": None,
               "learner_value": None, "record_value": None, "state": "", "why": ""}
        if rec and rec["scores"]:
            row["record"] = rec["scores"][0] / p.points
            row["record_value"] = rec["values"][0] if rec["values"] else None
            row["why"] = rec["messages"][0]
        if lv is None:
            row["state"] = "disagree"
            row["why"] = "the notebook never ran this problem's check"
        elif lv["not_here"]:
            row["state"], row["why"] = "not judged by the check here", lv["not_here"]
        elif rec is None or not rec["scores"]:
            row["state"], row["why"] = "disagree", "the grade of record did not grade it"
        else:
            row["learner"], row["learner_value"] = lv["fraction"], lv.get("value")
            row["state"] = "agree" if abs(lv["fraction"] - row["record"]) < 1e-9 else "disagree"
        rows.append(row)
    return rows


def agree(lessons, jobs: int = 4, out: pathlib.Path | None = None) -> dict:
    """Execute and grade each lesson's solution; with ``out``, the report is rewritten after every lesson."""
    from kernellab.notebook_cells import execute_notebook
    from kernellab.paths import repo_root
    from kernellab.report import _header
    from kernellab.grading.instructor.regrade import regrade
    res = {"rows": [], "notebooks": {}, "header": _header()}
    for lesson in lessons:
        nb = execute_notebook(repo_root() / "solutions" / lesson / f"{lesson}.ipynb")
        res["notebooks"][lesson] = {k: nb[k] for k in ("wall_s", "errors")}
        print(f"{lesson}: notebook executed in {nb['wall_s']:.0f} s, {len(nb['verdicts'])} checks recorded, "
              f"errors: {nb['errors']}", flush=True)
        record = regrade(lesson, times=1, jobs=jobs)
        res["rows"] += compare(lesson, nb["verdicts"], record)
        if out is not None:
            write(res, out)
    return res


def merge(parts: list, out: pathlib.Path) -> str:
    """One report from several runs on one GPU model (a device call is capped in time, so the lessons may be
    run over several): rows and notebooks are joined; each later run adds its date to the header."""
    res = json.loads(pathlib.Path(parts[0]).read_text())
    for path in parts[1:]:
        more = json.loads(pathlib.Path(path).read_text())
        if more["header"][0] != res["header"][0]:  # one report is one GPU model
            raise ValueError(f"{path} comes from another GPU: {more['header'][0]} vs {res['header'][0]}")
        res["rows"] += more["rows"]
        res["notebooks"].update(more["notebooks"])
        res["header"].append(f"- {', '.join(more['notebooks'])} in a later run: {more['header'][2].lstrip('- ')}")
    return write(res, out)


def _pct(fraction) -> str:
    return "-" if fraction is None else f"{fraction:.0%}"


def _val(value) -> str:
    return "" if value is None else f" ({value:.3g})"


def write(res: dict, out: pathlib.Path) -> str:
    from kernellab.report import _header, md_table
    out.mkdir(parents=True, exist_ok=True)
    rows = res["rows"]
    counts = {s: sum(r["state"] == s for r in rows) for s in dict.fromkeys(r["state"] for r in rows)}
    lines = ["# Learner checks vs the grade of record, same machine", ""] + res.get("header", _header()) + ["", (
        "Each solution notebook executed top to bottom (its check cells as a learner runs them), then each "
        "problem graded once by the grade of record in a fresh child process. Cells: the fraction of the "
        "problem's points each side gave, with the measured ratio of speed problems in brackets."), "",
        "Summary: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + ".", ""]
    for lesson, nb in res["notebooks"].items():
        lines.append(f"- {lesson}: notebook {nb['wall_s']:.0f} s, {len(nb['errors'])} cells with errors")
    lines.append("")
    lines += md_table(["lesson", "problem", "points", "learner's check", "grade of record", "verdicts", "note"], [
        [r["lesson"][:2], r["problem"], r["points"], _pct(r["learner"]) + _val(r["learner_value"]),
         _pct(r["record"]) + _val(r["record_value"]),
         f"**{r['state']}**" if r["state"] == "disagree" else r["state"], r["why"][:160].replace("|", "/")]
        for r in rows])
    text = "\n".join(lines) + "\n"
    (out / "agreement.md").write_text(text)
    (out / "agreement.json").write_text(json.dumps(res, indent=1, default=str))
    return text
