"""The instructor's class report for one lesson (``kernellab term report LESSON``): one HTML page, its plots
inline, built from what grading left behind: the grade of record's audit records
(``grading_logs/<student>/<lesson>/<problem>/result.json``) and the submitted notebooks.

Sections: pass rate per problem, the distribution of students' totals, each speed ratio's distribution per GPU
model, the most common reasons for lost points (the grade of record's own messages, numbers masked so that the
same reason groups), flagged submissions (times the roofline rejected; points from problems graded in the worker
rather than replayed by the judge), problems this machine could not grade (no GPU), and the similarity table
(``similarity``: kernels copied within the class or from the course's solutions).
"""
from __future__ import annotations

import base64
import html
import io
import json
import pathlib
import re
import statistics
from collections import Counter

from kernellab.notebook_source import read_notebook


def submissions(course: pathlib.Path, lesson: str) -> dict:
    """student -> submitted notebook path, for every student who handed ``lesson`` in."""
    root = pathlib.Path(course) / "submitted"
    return {p.parent.parent.name: p for p in sorted(root.glob(f"*/{lesson}/{lesson}.ipynb"))}


def records(course: pathlib.Path, lesson: str) -> list[dict]:
    """Every grade-of-record audit record (result.json) of ``lesson``."""
    root = pathlib.Path(course) / "grading_logs"
    return [json.loads(p.read_text()) for p in sorted(root.glob(f"*/{lesson}/*/result.json"))]


def reason(message: str) -> str:
    """A grade-of-record message reduced to its reason: its first sentence, numbers and quoted values masked, so
    that two students who lost points for the same thing group together."""
    first = re.split(r"(?<=[.!?])\s", message.strip(), maxsplit=1)[0]
    first = re.sub(r"`[^`]*`|'[^']*'", "…", first)
    return re.sub(r"[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?x?", "#", first)[:160]


def analyse(recs: list[dict]) -> dict:
    """The numbers behind the page."""
    per: dict = {}
    totals: dict = {}
    reasons: Counter = Counter()
    reason_problems: dict = {}
    flagged: list = []
    awaiting: dict = {}
    for r in recs:
        pid, student = r["problem"], r.get("student", "?")
        score, top = float(r.get("score", 0)), float(r.get("max_points", 0))
        p = per.setdefault(pid, {"n": 0, "full": 0, "scores": [], "max": top, "ratios": {}, "kind": r.get("kind")})
        p["n"] += 1
        p["full"] += score == top
        p["scores"].append(score)
        t = totals.setdefault(student, [0.0, 0.0])
        t[0] += score
        t[1] += top
        details = r.get("details") or {}
        value = details.get("value")
        if isinstance(value, (int, float)) and not details.get("flagged"):  # a rejected time is no speed
            gpu = ((r.get("environment") or {}).get("device") or {}).get("name", "?")
            p["ratios"].setdefault(gpu, []).append(float(value))
        why = str(r.get("why", ""))
        if "only graded on a GPU" in why or "graded only on a GPU of" in why:
            awaiting.setdefault(pid, []).append(student)
        elif score < top:
            key = reason(why)
            reasons[key] += 1
            reason_problems.setdefault(key, set()).add(pid)
        if details.get("flagged") or details.get("sketch_error"):
            flagged.append({"student": student, "problem": pid,
                            "why": "time rejected by the roofline" if details.get("flagged")
                            else "the timing's sketch check failed", "message": why})
    return {"per": per, "totals": totals, "reasons": reasons, "reason_problems": reason_problems,
            "flagged": flagged, "awaiting": awaiting}


def outside_replay(lesson: str, recs: list[dict]) -> list[dict]:
    """Points awarded by problems that the judge does not replay (their worker's own result is graded: lesson 07's
    compiled steps, docs/GRADE_OF_RECORD.md): where a hand check means most."""
    from kernellab.grading.judge.harness import replayable
    from kernellab.lessons import LESSONS, problems_of
    problems = problems_of(lesson) if lesson in LESSONS else {}
    worker_graded = {gid for gid, p in problems.items() if p.kind in ("correctness", "speed") and not replayable(p)}
    return [{"student": r.get("student", "?"), "problem": r["problem"], "why": "graded in the worker, not replayed",
             "message": f"{r.get('score', 0):g} / {r.get('max_points', 0):g}"}
            for r in recs if r["problem"] in worker_graded and r.get("score", 0) > 0]


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def _plots(a: dict) -> list[tuple[str, str]]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    per, names = a["per"], sorted(a["per"])
    images = []
    if names:
        fig, ax = plt.subplots(figsize=(7, 0.35 * len(names) + 1))
        ax.barh(names, [per[n]["full"] / per[n]["n"] for n in names], color="#4c72b0", label="full points")
        ax.barh(names, [sum(0 < s < per[n]["max"] for s in per[n]["scores"]) / per[n]["n"] for n in names],
                left=[per[n]["full"] / per[n]["n"] for n in names], color="#dd8452", label="partial")
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of submissions")
        ax.legend(fontsize=7, loc="lower right")
        ax.invert_yaxis()
        images.append(("Pass rate per problem", _png(fig)))
        plt.close(fig)
    if a["totals"]:
        fig, ax = plt.subplots(figsize=(7, 2.6))
        top = max(t[1] for t in a["totals"].values()) or 1
        ax.hist([t[0] for t in a["totals"].values()], bins=min(20, int(top) + 1), range=(0, top), color="#55a868")
        ax.set_xlabel(f"total points (of {top:g})")
        ax.set_ylabel("students")
        images.append(("Score distribution", _png(fig)))
        plt.close(fig)
    speed = [n for n in names if per[n]["ratios"]]
    if speed:
        fig, axes = plt.subplots(len(speed), 1, figsize=(7, 2.2 * len(speed)), squeeze=False)
        for ax, n in zip(axes[:, 0], speed):
            for gpu, vals in sorted(per[n]["ratios"].items()):
                ax.hist(vals, bins=20, alpha=0.6, label=f"{gpu} ({len(vals)})")
            ax.set_title(n, fontsize=9)
            ax.set_xlabel("measured ratio to the baseline")
            ax.legend(fontsize=7)
        fig.tight_layout()
        images.append(("Speed ratio per GPU model", _png(fig)))
        plt.close(fig)
    return images


def _table(head: list[str], rows: list[list]) -> str:
    if not rows:
        return "<p class='none'>None.</p>"
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in head)
    b = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{b}</table>"


SHOWN = 300  # similar pairs listed on the page, most similar first (a class that shares one published solution
# would otherwise list every pair of every cell)
CSS = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
       "table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;"
       "text-align:left;vertical-align:top;max-width:36rem;overflow-wrap:anywhere}th{background:#f3f3f3}"
       ".none{color:#777}.note{color:#555;font-size:.9rem}img{max-width:100%}")


def report(course: pathlib.Path, lesson: str, out: pathlib.Path, solution_nb=None, threshold: float | None = None
           ) -> dict:
    """Write the page to ``out``; return the numbers behind it (``per``: problem -> n, full, scores, max, ratios;
    ``similar``: the similarity rows; ``flagged``; ``reasons``)."""
    from kernellab.grading.instructor import similarity
    course = pathlib.Path(course).resolve()
    recs = records(course, lesson)
    a = analyse(recs)
    a["flagged"] += outside_replay(lesson, recs)
    subs = {}
    for student, path in submissions(course, lesson).items():
        try:
            subs[student] = read_notebook(path)
        except Exception:  # noqa: BLE001 - an unreadable notebook is preflight's finding, not the report's
            continue
    release = course.parent / "notebooks" / lesson / f"{lesson}.ipynb"
    if solution_nb is None:
        source = course.parent / "solutions" / lesson / f"{lesson}.ipynb"
        solution_nb = read_notebook(source) if source.exists() else None
    limit = similarity.THRESHOLD if threshold is None else threshold
    similar = similarity.compare(subs, read_notebook(release), solution_nb, limit) if release.exists() else []
    per = a["per"]
    names = sorted(per)
    problem_rows = [[n, per[n]["kind"] or "", per[n]["n"], f"{per[n]['full'] / per[n]['n']:.0%}",
                     f"{statistics.mean(per[n]['scores']):.2f} / {per[n]['max']:g}"] for n in names]
    ratio_rows = [[n, gpu, len(v), f"{statistics.median(v):.3g}x", f"{min(v):.3g}-{max(v):.3g}x"]
                  for n in names for gpu, v in sorted(per[n]["ratios"].items())]
    totals = [t[0] for t in a["totals"].values()]
    top = max((t[1] for t in a["totals"].values()), default=0)
    reason_rows = [[count, ", ".join(sorted(a["reason_problems"][why])), why]
                   for why, count in a["reasons"].most_common(12)]
    flag_rows = [[f["student"], f["problem"], f["why"], f["message"][:200]] for f in a["flagged"]]
    sim_rows = [[r["a"] if r["a"] != "SOLUTION" else "the course's solution", r["b"], r["cell"],
                 f"{r['similarity']:.2f}", r["shared"]] for r in similar]
    awaiting = a["awaiting"]
    parts = [f"<h1>{html.escape(lesson)}: class report</h1>",
             f"<p>{len(a['totals'])} students graded, {len(recs)} problem results. "
             + (f"Totals: median {statistics.median(totals):g} of {top:g}, mean {statistics.mean(totals):.1f}."
                if totals else "Nothing graded yet: run <code>kernellab term autograde</code> first.") + "</p>"]
    if awaiting:
        parts.append("<p><b>Not graded on this machine</b> (it has no GPU, or an older one): "
                     + html.escape(", ".join(f"{p} ({len(s)} students)" for p, s in sorted(awaiting.items())))
                     + ". These are marked as needing a grade in nbgrader; grade the lesson again on a GPU.</p>")
    parts += ["<h2>Problems</h2>", _table(["problem", "kind", "graded", "full points", "mean score"], problem_rows)]
    images = _plots(a)
    parts += [f"<h2>{t}</h2><img alt='{t}' src='data:image/png;base64,{b}'>" for t, b in images]
    parts += ["<h2>Speed ratios: median and range</h2>",
              "<p class='note'>The ratio to the baseline timed in the same run; bands are per GPU model.</p>",
              _table(["problem", "GPU", "graded", "median", "range"], ratio_rows),
              "<h2>Most common reasons for lost points</h2>",
              "<p class='note'>The grade of record's messages, first sentence, numbers masked (#).</p>",
              _table(["times", "problems", "reason"], reason_rows),
              "<h2>Flagged</h2>",
              "<p class='note'>Times the roofline rejected (faster than the GPU can be), and points from problems "
              "the judge does not replay (graded in the worker): worth a look by hand.</p>",
              _table(["student", "problem", "why", "message"], flag_rows),
              "<h2>Similar kernels</h2>",
              f"<p class='note'>Solution cells compared by token 5-grams after stripping comments, strings and "
              f"layout and renaming every identifier (grading/instructor/similarity.py); the release cell's own "
              f"code is left out. Listed at a Jaccard index of {limit:.2f} or more; cells shorter than "
              f"{similarity.MIN_SHINGLES} 5-grams are not compared. A reason to look, not proof.</p>",
              _table(["submission", "similar to", "cell", "similarity", "shared 5-grams"], sim_rows[:SHOWN]),
              f"<p class='note'>... and {len(sim_rows) - SHOWN} more pairs, less similar.</p>"
              if len(sim_rows) > SHOWN else ""]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(lesson)}: class report</title>"
            f"<style>{CSS}</style></head><body>{''.join(parts)}</body></html>")
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return {"per": per, "similar": similar, "flagged": a["flagged"], "reasons": a["reasons"],
            "awaiting": awaiting, "totals": a["totals"]}
