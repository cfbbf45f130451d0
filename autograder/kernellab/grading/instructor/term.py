"""The instructor's term around nbgrader, run in the course folder (``autograder/``):

    kernellab term preflight LESSON   # every submission: parses, every grade_id present, code rules, GPU it ran on
    kernellab term autograde LESSON [--jobs N] [--gpus N] [--ray local|ADDRESS] [--force]
                                      # every (student, problem) graded into the result store by N concurrent
                                      # jobs on every GPU (timing alone on its GPU), or on Ray graders, then
                                      # nbgrader autograde (one process for the class), which reads the store
    kernellab term feedback LESSON    # nbgrader generate_feedback (reasons and hints; no hidden tests or seeds),
                                      # then says where each page went (feedback/<student>/<lesson>/<lesson>.html)
    kernellab term export             # nbgrader export -> grades.csv, only assignments with submissions, a column
                                      # of points awaiting a GPU grading; says what it wrote
    kernellab term report LESSON      # the class report: pass rates, scores, speed ratios per GPU model, common
                                      # failure reasons, flagged submissions, similar kernels (reports/<lesson>.html)

Collecting an LMS download stays ``nbgrader zip_collect LESSON`` (see the README).
"""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import time

from kernellab.grading.instructor.class_report import records as results, submissions  # noqa: F401 (term's API)
from kernellab.notebook_source import grade_id, read_notebook, to_python
from kernellab.paths import nbgrader_command, tool_env


def nbgrader(course: pathlib.Path, *args, timeout: float = 3600) -> subprocess.CompletedProcess:
    """``nbgrader ARGS`` in the course folder, with the course's tool environment; the caller reads the code."""
    return subprocess.run(nbgrader_command(*args, "--log-level=WARN"), cwd=course,
                          capture_output=True, text=True, env=tool_env(), timeout=timeout)


def _release_ids(course: pathlib.Path, lesson: str) -> set:
    # resolve() first: the README runs this from autograder/ with the default --course ".", whose .parent is "."
    nb = read_notebook(pathlib.Path(course).resolve().parent / "notebooks" / lesson / f"{lesson}.ipynb")
    return {gid for gid in map(grade_id, nb.cells) if gid}


def fingerprints(nb) -> list[str]:
    """The device lines the setup cell printed when the learner ran the notebook ('GPU | torch | triton')."""
    seen = []
    for c in nb.cells:
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            for line in str(o.get("text", "")).splitlines():
                if "| torch " in line and "| triton " in line and line not in seen:
                    seen.append(line.strip())
    return seen


def preflight(course: pathlib.Path, lesson: str) -> list[dict]:
    """One row per submission: what would stop it being graded as the learner expects."""
    from kernellab.code_rules import broken_rules
    wanted = _release_ids(course, lesson)
    rows = []
    for student, path in submissions(course, lesson).items():
        row = {"student": student, "parses": True, "missing": [], "rules": [], "gpu": "", "ok": True}
        try:
            nb = read_notebook(path)
        except Exception as exc:  # noqa: BLE001 - a broken file is a finding, not a crash
            row.update(parses=False, ok=False, note=f"{type(exc).__name__}: {exc}"[:200])
            rows.append(row)
            continue
        row["missing"] = sorted(wanted - {gid for gid in map(grade_id, nb.cells) if gid})
        for c in nb.cells:
            meta = (c.get("metadata") or {}).get("nbgrader") or {}
            if c.cell_type == "code" and meta.get("solution"):
                row["rules"] += [f"{grade_id(c)}: {b}" for b in broken_rules([to_python(c.source)])]
        row["gpu"] = "; ".join(fingerprints(nb)) or "not run by the learner"
        # Missing cells are restored by nbgrader (add_missing_cells) and graded; rules cost those problems.
        row["ok"] = not row["missing"] and not row["rules"]
        rows.append(row)
    return rows


_STARTS = re.compile(r"Creating/updating student with ID '(?P<student>[^']+)'")
_FAILED = re.compile(r"There was an error processing assignment '[^']*' for student '(?P<student>[^']+)'")


def autograde(course: pathlib.Path, lesson: str, progress: bool = True) -> list[dict]:
    """``nbgrader autograde`` of every submission in one nbgrader process (one writer of the gradebook, and
    nbgrader's start paid once, not per student: 3.5 s each on a 2-core machine), with a bar advanced by
    nbgrader's own log as it starts each student. nbgrader goes on past a student whose notebook fails and names
    them at the end. The grade of record takes what the result store holds (``queue_then_autograde`` fills it)."""
    todo = list(submissions(course, lesson))
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(todo), desc=f"autograding {lesson}", file=sys.stdout)
    proc = subprocess.Popen(nbgrader_command("autograde", lesson, "--force", "--log-level=INFO"),
                            cwd=course, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=tool_env())
    seconds, logs, failed, current, t, tail = {}, {}, set(), None, time.monotonic(), ""
    try:
        for line in proc.stderr:
            tail = (tail + line)[-2000:]
            if m := _STARTS.search(line):
                if current is not None:
                    seconds[current] = time.monotonic() - t
                    if bar is not None:
                        bar.update(1)
                current, t = m["student"], time.monotonic()
            elif m := _FAILED.search(line):
                failed.add(m["student"])
            elif current is not None and ("ERROR" in line or logs.get(current)):
                logs[current] = (logs.get(current, "") + line)[-2000:]  # from its first error on
        proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        if bar is not None:
            bar.close()
    if current is not None:
        seconds[current] = time.monotonic() - t
        if proc.returncode != 0 and not failed:  # nbgrader stopped in this student's notebook, naming no one
            failed.add(current)
            logs[current] = logs.get(current) or tail
    return [{"student": s, "ok": s in seconds and s not in failed,
             "seconds": round(seconds.get(s, 0.0), 1),
             "error": logs.get(s, "")[-500:] if s in failed else ("" if s in seconds else "not autograded by nbgrader")}
            for s in todo]


def queue_then_autograde(course: pathlib.Path, lesson: str, jobs: int | None = None, force: bool = False,
                         progress: bool = True, gpus: int | None = None,
                         ray: str | None = None) -> tuple[dict, list[dict]]:
    """The class queue into the result store, then nbgrader autograde of the class (reading the store).
    A KeyboardInterrupt during the queue stops there (what was graded stays stored) and propagates."""
    from kernellab.grading.classroom.classqueue import describe, grade_class
    summary = grade_class(course, lesson, jobs=jobs, force=force, progress=progress, gpus=gpus, ray=ray)
    print(describe(summary))
    if summary["interrupted"]:
        raise KeyboardInterrupt("the grading queue was interrupted")
    t0 = time.monotonic()
    rows = autograde(course, lesson, progress=progress)
    n = max(1, len(rows))
    print(f"nbgrader autograde: {len(rows)} students in {time.monotonic() - t0:.1f} s "
          f"({(time.monotonic() - t0) / n:.1f} s per student, results read from the store)")
    return summary, rows


def gpu_notice(lesson: str) -> str | None:
    """A loud paragraph, before any grading, when this machine cannot grade some of ``lesson``'s problems (speed
    without a GPU, lesson 08's speed on a GPU older than sm_90); None when it can grade them all."""
    from kernellab.device import DEVICE
    from kernellab.lessons import LESSONS, problems_of
    if lesson not in LESSONS:
        return None  # the queue says what is wrong with the lesson id
    problems = problems_of(lesson)
    cannot = {gid: p for gid, p in problems.items() if p.not_gradable_here()}
    if not cannot:
        return None
    lost = sum(p.points for p in cannot.values())
    total = sum(p.points for p in problems.values())
    where = "a GPU" if not DEVICE.on_gpu else f"this GPU ({DEVICE.name}, {DEVICE.cc})"
    bar = "!" * 100
    return "\n".join([
        bar,
        f"!! {lesson}: {len(cannot)} of its {len(problems)} problems ({lost:g} of {total:g} points) cannot be graded "
        f"without {'a GPU' if not DEVICE.on_gpu else 'a newer GPU'}: {', '.join(sorted(cannot))}.",
        f"!! This machine has {'no GPU' if not DEVICE.on_gpu else where}. Those problems are scored 0 for now, "
        "said so in each learner's feedback,",
        "!! and marked in nbgrader's gradebook as needing a manual grade (the formgrader lists them; term export",
        "!! counts their points apart). For the grade of record, run the same command on a GPU machine.",
        bar])


def feedback_root(course: pathlib.Path) -> pathlib.Path:
    """Where nbgrader writes feedback: nbgrader_config's feedback_directory (autograder/feedback/)."""
    return pathlib.Path(course).resolve() / "feedback"


def feedback_pages(course: pathlib.Path, lesson: str) -> list[pathlib.Path]:
    return sorted(feedback_root(course).glob(f"*/{lesson}/{lesson}.html"))


def tidy_export(course: pathlib.Path) -> dict:
    """After ``nbgrader export``: keep in grades.csv only the assignments someone submitted (nbgrader writes a
    row of zeros per student for every assignment in the gradebook, submitted or not), and add a column
    ``awaiting_gpu``: the points of each submission that its grading machine could not grade (AwaitingGpu)."""
    import csv
    path = pathlib.Path(course).resolve() / "grades.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    handed_in, awaiting = _gradebook_facts(course)
    # a row with a timestamp was submitted too (the gradebook is the record; the timestamp may be absent)
    submitted = {a for a, _ in handed_in} | {r["assignment"] for r in rows if r["timestamp"]}
    kept = [r for r in rows if r["assignment"] in submitted]
    fields = (list(rows[0].keys()) if rows else ["assignment", "student_id"]) + ["awaiting_gpu"]
    for r in kept:
        r["awaiting_gpu"] = f"{awaiting.get((r['assignment'], r['student_id']), 0.0):g}"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(kept)
    return {"path": path, "rows": len(kept), "assignments": sorted(submitted),
            "dropped": sorted({r["assignment"] for r in rows} - submitted),
            "students": len({r["student_id"] for r in kept}),
            "awaiting": {k: v for k, v in awaiting.items() if v and k[0] in submitted}}


def _gradebook_facts(course: pathlib.Path) -> tuple[set, dict]:
    """From the gradebook: every (assignment, student) with a submission, and (assignment, student) -> points
    marked as needing a manual grade that no one has given yet."""
    from nbgrader.api import Gradebook
    db = pathlib.Path(course).resolve() / "gradebook.db"
    if not db.exists():
        return set(), {}
    handed_in, awaiting = set(), {}
    with Gradebook(f"sqlite:///{db}") as gb:
        for assignment in gb.assignments:
            for sub in assignment.submissions:
                key = (assignment.name, sub.student.id)
                handed_in.add(key)
                for nb in sub.notebooks:
                    for g in nb.grades:
                        if g.needs_manual_grade and g.manual_score is None:
                            awaiting[key] = awaiting.get(key, 0.0) + float(g.max_score or 0)
    return handed_in, awaiting


def describe_export(ex: dict) -> str:
    lines = [f"wrote {ex['path']}: {ex['rows']} rows, {ex['students']} students, "
             f"assignments with submissions: {', '.join(ex['assignments']) or 'none'}"]
    if ex["dropped"]:
        lines.append(f"  left out (no submissions): {', '.join(ex['dropped'])}")
    if ex["awaiting"]:
        lines.append(f"  {len(ex['awaiting'])} submissions have points awaiting a GPU grading (column awaiting_gpu; "
                     "they count as 0 in score until graded on a GPU)")
    return "\n".join(lines)


def report(course: pathlib.Path, lesson: str, out: pathlib.Path) -> dict:
    """The class report (grading/instructor/class_report.py) written to ``out``; returns per problem: n, full,
    scores, max, ratios per GPU model."""
    from kernellab.grading.instructor.class_report import report as class_report
    return class_report(course, lesson, out)["per"]


def main(action: str, lesson: str | None, course: str, out: str | None, jobs: int | None = None,
         force: bool = False, gpus: int | None = None, ray: str | None = None) -> int:
    course_dir = pathlib.Path(course)
    if action == "preflight":
        rows = preflight(course_dir, lesson)
        for r in rows:
            what = ("ok" if r["ok"] else "CHECK") + (f"; missing {', '.join(r['missing'])}" if r["missing"] else "")
            what += f"; rules: {' | '.join(r['rules'][:3])}" if r["rules"] else ""
            what += "" if r["parses"] else f"; does not parse: {r.get('note', '')}"
            print(f"{r['student']:<24} {what}  [{r['gpu']}]")
        return 0 if all(r["ok"] for r in rows) else 1
    if action == "autograde":
        if notice := gpu_notice(lesson):
            print(notice, file=sys.stderr, flush=True)  # first, before minutes of grading scroll it away
        try:
            _, res = queue_then_autograde(course_dir, lesson, jobs=jobs, force=force, gpus=gpus, ray=ray)
        except KeyboardInterrupt:
            print("Interrupted: the results graded so far are in the store; the same command resumes from there.")
            return 130
        for r in res:
            print(f"{r['student']:<24} {'ok' if r['ok'] else 'FAILED'} {r['seconds']} s {r['error']}")
        if notice:
            print(notice, file=sys.stderr)  # and again at the end, where the instructor reads the outcome
        return 0 if all(r["ok"] for r in res) else 1
    if action == "feedback":
        r = nbgrader(course_dir, "generate_feedback", lesson, "--force")
        if r.returncode:
            print(r.stdout[-2000:], r.stderr[-2000:])
            return r.returncode
        pages = feedback_pages(course_dir, lesson)
        print(f"wrote {len(pages)} feedback pages, one per student, under "
              f"{feedback_root(course_dir)}/STUDENT/{lesson}/{lesson}.html")
        for p in pages[:5]:
            print(f"  {p}")
        if len(pages) > 5:
            print(f"  ... and {len(pages) - 5} more")
        return 0
    if action == "export":
        r = nbgrader(course_dir, "export")
        if r.returncode:
            print(r.stdout[-2000:], r.stderr[-2000:])
            return r.returncode
        print(describe_export(tidy_export(course_dir)))
        return 0
    if action == "report":
        path = pathlib.Path(out or course_dir / "reports" / f"{lesson}.html")
        from kernellab.grading.instructor.class_report import report as class_report
        r = class_report(course_dir, lesson, path)
        print(f"wrote {path.resolve()}: {len(r['totals'])} students, {len(r['per'])} problems, "
              f"{len(r['flagged'])} flagged results, {len(r['similar'])} pairs of similar kernels "
              f"(open it in a browser)")
        return 0
    raise SystemExit(f"unknown action {action}")
