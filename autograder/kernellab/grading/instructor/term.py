"""The instructor's term around nbgrader, run in the course folder (``autograder/``):

    kernellab term preflight LESSON   # every submission: parses, every grade_id present, code rules, GPU it ran on
    kernellab term autograde LESSON [--jobs N] [--gpus N] [--ray local|ADDRESS] [--force]
                                      # every (student, problem) graded into the result store by N concurrent
                                      # jobs on every GPU (timing alone on its GPU), or on Ray graders, then
                                      # nbgrader autograde (one process for the class), which reads the store
    kernellab term feedback LESSON    # nbgrader generate_feedback (reasons and hints; no hidden tests or seeds)
    kernellab term export             # nbgrader export -> grades.csv
    kernellab term report LESSON      # per-problem pass rates and speed ratios per GPU model, as plots in HTML

Collecting an LMS download stays ``nbgrader zip_collect LESSON`` (see the README).
"""
from __future__ import annotations

import base64
import io
import json
import pathlib
import re
import subprocess
import sys
import time

from kernellab.notebook_source import grade_id, read_notebook, to_python
from kernellab.paths import nbgrader_command, tool_env


def nbgrader(course: pathlib.Path, *args, timeout: float = 3600) -> subprocess.CompletedProcess:
    """``nbgrader ARGS`` in the course folder, with the course's tool environment; the caller reads the code."""
    return subprocess.run(nbgrader_command(*args, "--log-level=WARN"), cwd=course,
                          capture_output=True, text=True, env=tool_env(), timeout=timeout)


def submissions(course: pathlib.Path, lesson: str) -> dict:
    """student -> submitted notebook path, for every student who handed ``lesson`` in."""
    root = pathlib.Path(course) / "submitted"
    return {p.parent.parent.name: p for p in sorted(root.glob(f"*/{lesson}/{lesson}.ipynb"))}


def _release_ids(course: pathlib.Path, lesson: str) -> set:
    nb = read_notebook(pathlib.Path(course).parent / "notebooks" / lesson / f"{lesson}.ipynb")
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


def results(course: pathlib.Path, lesson: str) -> list[dict]:
    """Every grade-of-record audit record (result.json) of ``lesson``."""
    root = pathlib.Path(course) / "grading_logs"
    return [json.loads(p.read_text()) for p in sorted(root.glob(f"*/{lesson}/*/result.json"))]


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def report(course: pathlib.Path, lesson: str, out: pathlib.Path) -> dict:
    """Per-question analytics as an HTML page with plots: pass rate per problem, and the distribution of
    each speed ratio per GPU model. Returns the numbers behind them."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    recs = results(course, lesson)
    per = {}
    for r in recs:
        p = per.setdefault(r["problem"], {"n": 0, "full": 0, "scores": [], "max": r.get("max_points", 0),
                                          "ratios": {}})
        p["n"] += 1
        p["full"] += r.get("score") == r.get("max_points")
        p["scores"].append(r.get("score", 0))
        value = (r.get("details") or {}).get("value")
        if isinstance(value, (int, float)):
            gpu = ((r.get("environment") or {}).get("device") or {}).get("name", "?")
            p["ratios"].setdefault(gpu, []).append(value)
    names = sorted(per)
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(names) + 1))
    ax.barh(names, [per[n]["full"] / per[n]["n"] for n in names], color="#4c72b0")
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of submissions with full points")
    ax.invert_yaxis()
    images = [("Pass rate per problem", _png(fig))]
    plt.close(fig)
    speed = [n for n in names if per[n]["ratios"]]
    if speed:
        fig, axes = plt.subplots(len(speed), 1, figsize=(7, 2.2 * len(speed)), squeeze=False)
        for ax, n in zip(axes[:, 0], speed):
            for gpu, vals in per[n]["ratios"].items():
                ax.hist(vals, bins=20, alpha=0.6, label=f"{gpu} ({len(vals)})")
            ax.set_title(n)
            ax.set_xlabel("measured ratio")
            ax.legend(fontsize=7)
        fig.tight_layout()
        images.append(("Speed ratio per GPU model", _png(fig)))
        plt.close(fig)
    rows = "".join(f"<tr><td>{n}</td><td>{per[n]['n']}</td><td>{per[n]['full'] / per[n]['n']:.0%}</td>"
                   f"<td>{sum(per[n]['scores']) / per[n]['n']:.2f} / {per[n]['max']:g}</td></tr>" for n in names)
    html = (f"<html><head><meta charset='utf-8'><title>{lesson}: analytics</title></head><body>"
            f"<h1>{lesson}: {len({r['student'] for r in recs})} submissions</h1>"
            "<table border=1 cellpadding=4><tr><th>problem</th><th>graded</th><th>full points</th>"
            f"<th>mean score</th></tr>{rows}</table>"
            + "".join(f"<h2>{t}</h2><img alt='{t}' src='data:image/png;base64,{b}'>" for t, b in images)
            + "</body></html>")
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html)
    return per


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
        try:
            _, res = queue_then_autograde(course_dir, lesson, jobs=jobs, force=force, gpus=gpus, ray=ray)
        except KeyboardInterrupt:
            print("Interrupted: the results graded so far are in the store; the same command resumes from there.")
            return 130
        for r in res:
            print(f"{r['student']:<24} {'ok' if r['ok'] else 'FAILED'} {r['seconds']} s {r['error']}")
        return 0 if all(r["ok"] for r in res) else 1
    if action in ("feedback", "export"):
        args = ["generate_feedback", lesson, "--force"] if action == "feedback" else ["export"]
        r = nbgrader(course_dir, *args)
        print(r.stdout[-2000:], r.stderr[-2000:])
        return r.returncode
    if action == "report":
        path = pathlib.Path(out or course_dir / "reports" / f"{lesson}.html")
        per = report(course_dir, lesson, path)
        print(f"wrote {path} ({len(per)} problems)")
        return 0
    raise SystemExit(f"unknown action {action}")
