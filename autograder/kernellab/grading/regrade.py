"""Regrade stability: grade problems of one submission many times, each time in a fresh child process with a
fresh seed (as the grade of record does), and report every score and, for speed problems, the spread of the
measured ratio next to the edges of its bands.

    kernellab regrade --lesson 06_profile_first --problems block_speed,block_train_speed --times 20
"""
from __future__ import annotations

import json
import os
import pathlib
import statistics
import sys


def regrade(lesson: str, problems=None, times: int = 20, notebook=None, progress: bool = True,
            after_each=None) -> dict:
    """problem id -> {"scores": [...], "values": [...]} for the solution (or ``notebook``) of ``lesson``."""
    from ..build import repo_root
    from ..ceilings import measure_ceilings
    from ..learner import facts as device_facts
    from ..lessons import problems_of
    from .harness import clamp_points, grade_problem
    from .notebook_code import read_notebook
    nb = read_notebook(notebook or repo_root() / "solutions" / lesson / f"{lesson}.ipynb")
    wanted = problems_of(lesson)
    ids = problems or list(wanted)
    ceil, facts = measure_ceilings(quiet=True), device_facts()
    res = {}
    todo = [(pid, i) for pid in ids for i in range(times)]
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(todo), desc=f"regrading {lesson}", file=sys.stdout)
    for pid, _ in todo:
        p = wanted[pid]
        seed = int.from_bytes(os.urandom(6), "little")
        outcome, _record = grade_problem(p, nb, seed, ceil, facts, lesson)
        r = res.setdefault(pid, {"points": p.points, "scores": [], "values": [], "messages": []})
        r["scores"].append(clamp_points(outcome.fraction, p.points))
        if "value" in outcome.details:
            r["values"].append(outcome.details["value"])
        if outcome.message not in r["messages"]:
            r["messages"].append(outcome.message)
        if bar is not None:
            bar.update(1)
        if after_each is not None:  # e.g. rewrite the report: a run cut short keeps what it measured
            after_each(_summarise(res, wanted))
    if bar is not None:
        bar.close()
    return _summarise(res, wanted)


def _summarise(res: dict, wanted: dict) -> dict:
    """Each problem's scores with the measured ratio's range, spread and margins to the band edges."""
    for pid, r in res.items():
        bands = getattr(wanted[pid], "bands", ())
        r["bands"] = [t for t, _ in bands]
        if r["values"]:
            lo, hi = min(r["values"]), max(r["values"])
            r["value_min"], r["value_max"], r["value_median"] = lo, hi, statistics.median(r["values"])
            below = [t for t in r["bands"] if t <= lo]
            above = [t for t in r["bands"] if t > hi]
            # how far the measured range sits from the band edges around it, as fractions of the edge
            r["margin_below"] = (lo - max(below)) / max(below) if below else None
            r["margin_above"] = (min(above) - hi) / min(above) if above else None
            r["spread"] = (hi - lo) / r["value_median"]
    return res


def write(res: dict, lesson: str, out: pathlib.Path) -> str:
    from ..bench import _header, md_table
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"# Regrade stability: {lesson}", ""] + _header() + ["", (
        "Each row: the problem graded N times, each in a fresh child process with a fresh seed. Spread = "
        "(max - min) / median of the measured ratio; the margins say how far that range sits from the band "
        "edges below and above it, as a fraction of the edge."), ""]
    lines += md_table(["problem", "N", "scores seen", "ratio min", "median", "max", "spread", "bands",
                       "margin below", "margin above"], [
        [pid, len(r["scores"]), ", ".join(f"{s:g}" for s in sorted(set(r["scores"]))),
         *(f"{r[k]:.3f}" if k in r else "-" for k in ("value_min", "value_median", "value_max")),
         f"{r['spread']:.1%}" if "spread" in r else "-", " / ".join(f"{t:g}" for t in r["bands"]) or "-",
         "-" if r.get("margin_below") is None else f"{r['margin_below']:.0%}",
         "-" if r.get("margin_above") is None else f"{r['margin_above']:.0%}"] for pid, r in res.items()])
    text = "\n".join(lines) + "\n"
    (out / f"regrade_{lesson}.md").write_text(text)
    (out / f"regrade_{lesson}.json").write_text(json.dumps(res, indent=1, default=str))
    return text
