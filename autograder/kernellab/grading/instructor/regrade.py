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


def select(lesson: str, problems=None) -> list:
    """Problem ids of ``lesson``: all of them, a list, or the words ``speed`` / ``untimed`` for either kind."""
    from kernellab.lessons import problems_of
    wanted = problems_of(lesson)
    if problems in (["speed"], ["untimed"]):
        return [pid for pid, p in wanted.items() if (p.kind == "speed") == (problems == ["speed"])]
    unknown = [pid for pid in problems or [] if pid not in wanted]
    if unknown:
        raise SystemExit(f"{lesson} has no problem {', '.join(unknown)}; it has {', '.join(wanted)}")
    return list(problems or wanted)


def regrade(lesson: str, problems=None, times: int = 20, notebook=None, progress: bool = True,
            after_each=None, jobs: int = 1) -> dict:
    """problem id -> {"scores": [...], "values": [...]} for the solution (or ``notebook``) of ``lesson``.

    ``jobs`` > 1 grades that many at a time (each grading is its own child processes) under the class queue's
    GPU slots (grading/classroom/slots.py): a speed problem's worker runs beside other work, and its judge times with the
    GPU alone, so nothing else runs while it times. With ``jobs`` = 1 everything runs one after another.
    """
    import contextlib
    from concurrent.futures import ThreadPoolExecutor

    from kernellab.ceilings import measure_ceilings
    from kernellab.learner import facts as device_facts
    from kernellab.lessons import problems_of
    from kernellab.notebook_source import read_notebook
    from kernellab.paths import repo_root
    from kernellab.grading.judge import harness
    from kernellab.grading.judge.harness import clamp_points, grade_problem
    from kernellab.grading.classroom.slots import GpuSlots
    nb = read_notebook(notebook or repo_root() / "solutions" / lesson / f"{lesson}.ipynb")
    wanted = problems_of(lesson)
    ids = select(lesson, problems)
    ceil, facts = measure_ceilings(quiet=True), device_facts()
    res = {pid: {"points": wanted[pid].points, "scores": [], "values": [], "messages": []} for pid in ids}
    untimed = [pid for pid in ids if wanted[pid].kind != "speed" for _ in range(times)]
    timed = [pid for pid in ids if wanted[pid].kind == "speed" for _ in range(times)]
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(untimed) + len(timed), desc=f"regrading {lesson}", file=sys.stdout)

    slots = GpuSlots(1, jobs=jobs) if jobs > 1 else None
    grade = slots.grader(grade_problem, harness._STOP) if slots is not None else grade_problem

    def one(pid):
        seed = int.from_bytes(os.urandom(6), "little")
        outcome, record = grade(wanted[pid], nb, seed, ceil, facts, lesson)
        if record.get("regraded_alone"):
            res[pid]["regraded_alone"] = res[pid].get("regraded_alone", 0) + 1
        return pid, outcome

    def keep(pid, outcome):
        r = res[pid]
        r["scores"].append(clamp_points(outcome.fraction, wanted[pid].points))
        if "value" in outcome.details:
            r["values"].append(outcome.details["value"])
        if outcome.message not in r["messages"]:
            r["messages"].append(outcome.message)
        if bar is not None:
            bar.update(1)
        if after_each is not None:  # e.g. rewrite the report: a run cut short keeps what it measured
            after_each(_summarise({k: v for k, v in res.items() if v["scores"]}, wanted))

    with harness.use_slots(slots) if slots is not None else contextlib.nullcontext(), \
            ThreadPoolExecutor(max(1, jobs)) as pool:
        for pid, outcome in pool.map(one, untimed + timed):
            keep(pid, outcome)
    if bar is not None:
        bar.close()
    return _summarise(res, wanted)


def _summarise(res: dict, wanted: dict) -> dict:
    """Each problem's scores with the measured ratio's range, spread and margins to the band edges."""
    for pid, r in res.items():
        bands = getattr(wanted[pid], "bands", ())
        r["bands"] = [t for t, _ in bands]
        if r["values"]:
            r.update(ratio_range(r["values"]))
            lo, hi = r["value_min"], r["value_max"]
            below = [t for t in r["bands"] if t <= lo]
            above = [t for t in r["bands"] if t > hi]
            # how far the measured range sits from the band edges around it, as fractions of the edge
            r["margin_below"] = (lo - max(below)) / max(below) if below else None
            r["margin_above"] = (min(above) - hi) / min(above) if above else None
    return res


def ratio_range(values: list[float]) -> dict:
    """Min, max and median of measured speed ratios, and their spread: (max - min) / median."""
    lo, hi, med = min(values), max(values), statistics.median(values)
    return {"value_min": lo, "value_max": hi, "value_median": med, "spread": (hi - lo) / med if med else None}


def write(res: dict, lesson: str, out: pathlib.Path) -> str:
    from kernellab.report import _header, md_table
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"# Regrade stability: {lesson}", ""] + _header() + ["", (
        "Each row: the problem graded N times, each in a fresh child process with a fresh seed. Spread = "
        "(max - min) / median of the measured ratio; the margins say how far that range sits from the band "
        "edges below and above it, as a fraction of the edge."), ""]
    lines += md_table(["problem", "N", "scores seen", "ratio min", "median", "max", "spread", "bands",
                       "margin below", "margin above"], [
        [pid, len(r["scores"]), ", ".join(f"{s:g}" for s in sorted(set(r["scores"]))),
         *(f"{r[k]:.3f}" if k in r else "-" for k in ("value_min", "value_median", "value_max")),
         f"{r['spread']:.1%}" if r.get("spread") is not None else "-", " / ".join(f"{t:g}" for t in r["bands"]) or "-",
         "-" if r.get("margin_below") is None else f"{r['margin_below']:.0%}",
         "-" if r.get("margin_above") is None else f"{r['margin_above']:.0%}"] for pid, r in res.items()])
    text = "\n".join(lines) + "\n"
    (out / f"regrade_{lesson}.md").write_text(text)
    (out / f"regrade_{lesson}.json").write_text(json.dumps(res, indent=1, default=str))
    return text


def summary(folder: pathlib.Path) -> str:
    """One table over every regrade report in ``folder``: each problem's runs with their GPU, N, scores,
    ratio range and margins, so "every problem, 20 times" can be read off in one place."""
    from kernellab.report import md_table
    from kernellab.lessons import LESSONS, problems_of
    runs, notes = [], []
    for path in sorted(folder.glob("regrade_*.json")):
        res = json.loads(path.read_text())
        md = path.with_suffix(".md").read_text() if path.with_suffix(".md").exists() else ""
        gpu = next((ln.split("**")[1] for ln in md.splitlines() if ln.startswith("- GPU: **")), "?")
        date = next((ln.split(": ", 1)[1] for ln in md.splitlines() if ln.startswith("- date: ")), "?")
        notes += [f"- {path.stem}: {ln[2:]}" for ln in md.splitlines() if ln.startswith("> ")]  # added by hand
        for pid, r in res.items():
            if isinstance(r, dict) and "scores" in r:
                runs.append((pid, path.stem, gpu, date, r))
    rows, short = [], []
    for lesson in LESSONS:
        for pid in problems_of(lesson):
            mine = [x for x in runs if x[0] == pid and x[1].startswith(f"regrade_{lesson}")]
            if not any(len(r["scores"]) >= 20 and "_slow_add" not in stem for _, stem, _, _, r in mine):
                short.append(f"{lesson} {pid}")
            for _, stem, gpu, date, r in mine:
                rows.append([lesson[:2], pid, stem.removeprefix(f"regrade_{lesson}").lstrip("_") or "solution", gpu,
                             date, len(r["scores"]), ", ".join(f"{s:g}" for s in sorted(set(r["scores"]))),
                             f"{r['value_min']:.3f}–{r['value_max']:.3f}" if r.get("values") else "-",
                             f"{r['spread']:.1%}" if r.get("spread") is not None else "-",
                             "-" if r.get("margin_below") is None else f"{r['margin_below']:.1%}",
                             "-" if r.get("margin_above") is None else f"{r['margin_above']:.1%}"])
    lines = ["# Regrade stability: every run", "", (
        "Built by `kernellab regrade-summary` from the regrade_*.json files here. Run: the report's suffix "
        "(solution = the reference solution; untimed = its correctness and answer problems; a corpus entry's "
        "name = that submission). Spread = (max - min) / median of the measured ratio; margins: how far "
        "that range sits from the band edge below and above it."), ""]
    lines += md_table(["lesson", "problem", "run", "GPU", "date", "N", "scores seen", "ratio range", "spread",
                       "margin below", "margin above"], rows)
    lines += ["", "Notes on runs:", ""] + notes if notes else []
    lines += ["", "Problems with no run of 20 gradings of the solution yet: " + (", ".join(short) or "none") + "."]
    text = "\n".join(lines) + "\n"
    (folder / "regrade_summary.md").write_text(text)
    return text
