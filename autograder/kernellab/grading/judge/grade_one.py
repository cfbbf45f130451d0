"""``kernellab grade NOTEBOOK``: one submitted notebook graded by the grade of record.

What a TA runs on one student's work, and what the nbgrader preprocessor, ``term autograde``, ``regrade``
and ``corpus`` call: each problem's points, maximum and reason, and the device it was graded on.
"""
from __future__ import annotations

import json
import pathlib
import sys

from kernellab.device import DEVICE
from kernellab.lessons import LESSONS, problems_of
from kernellab.grading.judge.harness import grade_notebook


def lesson_of(path: pathlib.Path) -> str:
    """The lesson a notebook is graded as: the one its file name ends with (nbgrader's and the course's names).
    Never guessed from what the notebook holds: its cells and metadata are the learner's to write."""
    for lesson in LESSONS:
        if path.stem.endswith(lesson) or path.stem == lesson:
            return lesson
    raise SystemExit(f"{path}: the file name names no lesson ({', '.join(LESSONS)}); pass --lesson LESSON.")


def grade_file(path, json_out=None, problems=None, secret_file=None, student: str | None = None,
               lesson: str | None = None, logs_dir=None, progress: bool = True) -> dict:
    import nbformat

    from kernellab.grading.judge.secret import course_secret
    path = pathlib.Path(path)
    nb = nbformat.read(str(path), as_version=4)
    lesson = lesson or lesson_of(path)
    if secret_file:
        secret = pathlib.Path(secret_file).read_bytes().strip()
    else:
        secret = course_secret(pathlib.Path(__file__).resolve().parents[2])
    unknown = set(problems or ()) - set(problems_of(lesson))
    if unknown:
        raise SystemExit(f"{lesson} has no problem {', '.join(sorted(unknown))}; it has {', '.join(problems_of(lesson))}")
    scores = grade_notebook(nb, lesson, student or path.stem, secret, logs_dir=logs_dir, progress=progress,
                            only=problems)
    out = {"notebook": str(path), "lesson": lesson,
           "problems": {p: {"points": s, "max": m, "message": msg} for p, (s, m, msg) in scores.items()},
           "device": DEVICE.as_dict()}
    if json_out:
        pathlib.Path(json_out).write_text(json.dumps(out, indent=1))
    return out


def table(out: dict) -> str:
    rows = [f"{out['lesson']}  ({out['device'].get('name', 'cpu')})"]
    width = max([len(p) for p in out["problems"]] + [7])
    for p, r in out["problems"].items():
        rows.append(f"  {p:<{width}}  {r['points']:>5g} / {r['max']:<3g}  {r['message']}")
    got = sum(r["points"] for r in out["problems"].values())
    most = sum(r["max"] for r in out["problems"].values())
    rows.append(f"  {'total':<{width}}  {got:>5g} / {most:<3g}")
    return "\n".join(rows)


def main(path, json_out=None, problems=None, secret_file=None, student=None, lesson=None) -> int:
    out = grade_file(path, json_out, problems, secret_file, student, lesson)
    sys.stdout.write(table(out) + "\n")
    return 0
