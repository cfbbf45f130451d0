"""Everything the course shows about itself on a GPU, in one command:

    kernellab gpu-report --out DIR

1. the benchmark (bench.py) into DIR/bench;
2. every solution notebook executed top to bottom (wall time; target <= 3 min on an H100);
3. an nbgrader round trip per lesson (generate, autograde, feedback, export) with the solution and
   a few known-wrong submissions, with the autograde wall time (target <= 5 min per submission).
Results go to DIR/gpu_report.md and DIR/gpu_report.json.
"""
from __future__ import annotations

import json
import math
import pathlib
import sys

from .bench import run_bench
from .lessons import LESSONS
from .notebook_cells import execute_notebook
from .paths import repo_root
from .report import _header


def grade_round_trip(lesson: str, students=None, report: dict | None = None, saved=lambda: None) -> dict:
    """Grade the lesson's submissions through nbgrader into ``report`` (student -> scores, reasons, wall time);
    ``saved()`` after each one, so that a run cut short by a time limit keeps the students it graded."""
    from .grading.instructor import submissions as S
    from .grading.instructor.dryrun import Course
    course = Course()
    course.generate(lesson)
    rel, src = course.release_nb(lesson), course.source_nb(lesson)
    subs = {"solution": S.filled(rel, src), "blank": rel}
    for name, over in S.known_wrong(lesson, src).items():
        subs[name] = S.filled(rel, src, over)
    if students:
        subs = {k: v for k, v in subs.items() if k in students}
    report = {} if report is None else report
    for student, nb in subs.items():
        course.submit(lesson, student, nb)
        wall = course.autograde(lesson, student)
        scores = course.cell_scores(lesson, student)
        why, details = {}, {}
        for gid in scores:
            try:
                rec = course.result(lesson, student, gid)
            except OSError:
                continue
            why[gid] = rec["why"]
            details[gid] = {k: v for k, v in rec.get("details", {}).items() if k not in ("cand_ms", "base_ms")}
        report[student] = {"autograde_wall_s": wall, "scores": scores, "why": why, "details": details}
        print(f"{lesson} {student}: {sum(v or 0 for v in scores.values()):g} points in {wall:.0f} s", flush=True)
        saved()
    try:
        course.feedback(lesson)
        report["_feedback"] = "ok"
    except RuntimeError as exc:
        report["_feedback"] = f"failed: {exc}"[:2000]
    report["_grades_csv"] = course.export()
    return report


def main(out_dir: str, students=None, bench: bool = True, execute: bool = True, lessons=None) -> None:
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lessons = lessons or list(LESSONS)
    if bench:
        run_bench(str(out / "bench"), lessons=lessons)
    res = {"notebooks": {}, "grading": {}}
    for lesson in lessons:
        path = repo_root() / "solutions" / lesson / f"{lesson}.ipynb"
        res["notebooks"][lesson] = execute_notebook(path) if execute else {"wall_s": float("nan"), "errors": [],
                                                                            "outputs": []}
        print(f"executed {lesson}: {res['notebooks'][lesson]['wall_s']:.0f} s, "
              f"errors: {res['notebooks'][lesson]['errors']}", flush=True)
        res["grading"][lesson] = {}
        grade_round_trip(lesson, students, res["grading"][lesson], saved=lambda: _save(res, out, quiet=True))
    _save(res, out)


def _save(res: dict, out: pathlib.Path, quiet: bool = False) -> None:
    res["header"] = _header()
    (out / "gpu_report.json").write_text(json.dumps(res, indent=1, default=str))
    write_report(res, out, quiet)


def merge(parts: list, out_dir: str) -> None:
    """One report from several runs of the same code on one GPU (each call of the device is capped in
    time, so a full round trip may be graded over several). Submissions from later parts are added."""
    res = json.loads(pathlib.Path(parts[0]).read_text())
    for p in parts[1:]:
        more = json.loads(pathlib.Path(p).read_text())
        assert more["header"][0] == res["header"][0], "parts come from different GPUs"
        for lesson, subs in more["grading"].items():
            res["grading"].setdefault(lesson, {}).update({k: v for k, v in subs.items() if not k.startswith("_")})
            res["grading"][lesson]["_grades_csv"] = {**res["grading"][lesson].get("_grades_csv", {}),
                                                     **subs.get("_grades_csv", {})}
        res.setdefault("parts", []).append(more["header"])
    out = pathlib.Path(out_dir)
    (out / "gpu_report.json").write_text(json.dumps(res, indent=1, default=str))
    write_report(res, out)


def write_report(res: dict, out: pathlib.Path, quiet: bool = False) -> None:
    lines = ["# KernelLab on a GPU: notebooks executed and graded", ""] + res["header"] + [""]
    for part in res.get("parts", []):
        lines.append(f"- merged with a second run: {part[2].lstrip('- ')}")
    if res.get("parts"):
        lines.append("")
    for lesson in res["notebooks"]:
        nbres = res["notebooks"][lesson]
        graded = [k for k in res["grading"].get(lesson, {}) if not k.startswith("_")]
        if math.isnan(nbres["wall_s"]):  # --no-execute: nothing to say about the notebook
            lines += [f"## {lesson}", "", "Solution notebook: not executed in this run (--no-execute).", ""]
        else:
            lines += [f"## {lesson}", "",
                      f"Solution notebook executed top to bottom: **{nbres['wall_s']:.0f} s** "
                      f"({len(nbres['errors'])} cells with errors).", "", "Check cells said:", ""]
        lines += [f"- {o}" for o in nbres["outputs"]]
        if not graded:  # executed only (--students none)
            lines.append("")
            continue
        ref = "solution" if "solution" in graded else graded[0]
        lines += ["", "| submission | autograde wall s | " + " | ".join(
            sorted(res["grading"][lesson][ref]["scores"])) + " |",
            "|---" * (2 + len(res["grading"][lesson][ref]["scores"])) + "|"]
        for student, r in res["grading"][lesson].items():
            if student.startswith("_"):
                continue
            cells = " | ".join(f"{r['scores'][g]:g}" for g in sorted(r["scores"]))
            lines.append(f"| {student} | {r['autograde_wall_s']:.0f} | {cells} |")
        lines += ["", f"Why (grade of record, {ref}):", ""]
        lines += [f"- {g}: {w}" for g, w in sorted(res["grading"][lesson][ref]["why"].items())]
        lines += ["", "Why (wrong submissions, the problem each attacks):", ""]
        for student, r in res["grading"][lesson].items():
            if student in ("solution", "blank") or student.startswith("_"):
                continue
            lost = [f"{g}: {r['why'].get(g, '')}" for g in sorted(r["scores"])
                    if (r["scores"][g] or 0) < (res["grading"][lesson][ref]["scores"][g] or 0)]
            lines.append(f"- **{student}** lost: " + ("; ".join(lost) if lost else "nothing"))
        lines.append("")
    (out / "gpu_report.md").write_text("\n".join(lines) + "\n")
    if not quiet:
        print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "assets/gpu")

