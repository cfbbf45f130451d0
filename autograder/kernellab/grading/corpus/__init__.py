"""The cheat corpus and the honest controls: submissions that try to gain points without a correct, fast
Triton kernel, and correct ones written differently, each graded by the grade of record.

    kernellab corpus [--gpu-only] [--out assets/gpu]

Each entry is the reference solution with one cell changed. It attacks one problem (``problem``); every
other problem whose cells it leaves alone gets exactly the solution's sources, so it is graded exactly as the
solution is (shown per entry). Cheats must score 0 on what they attack; honest controls must keep every
correctness point and, on a GPU, the speed points their measured speed earns.
"""
from __future__ import annotations

import importlib
import pkgutil
from kernellab.device import DEVICE
from kernellab.grading.instructor import submissions as S
from kernellab.grading.judge import harness
import json
import pathlib
from kernellab.notebook_source import sources_for
import sys

from . import entries as _entries
from .edits import _notebooks
from .entry import Entry, runs_here  # noqa: F401 (the package's names)


def _load() -> list[Entry]:
    """Every entry file's ENTRY, cheats first, then by lesson and name."""
    found = [importlib.import_module(f"{_entries.__name__}.{m.name}").ENTRY
             for m in pkgutil.iter_modules(_entries.__path__)]
    return sorted(found, key=lambda e: (e.honest, e.lesson, e.name))


ENTRIES = _load()
CHEATS = [e for e in ENTRIES if not e.honest]
CONTROLS = [e for e in ENTRIES if e.honest]


def by_name(name: str) -> Entry:
    return next(e for e in ENTRIES if e.name == name)


def notebook_of(e: Entry):
    rel, src = _notebooks(e.lesson)
    return S.filled(rel, src, e.edit(S.solution_texts(src)))


def write_notebook(e: Entry, path) -> None:
    S.write(notebook_of(e), path)


def grade_entry(e: Entry, seed: int, ceil=None, facts=None) -> dict:
    """Grade ``e`` on the problem it attacks; report which other problems it leaves graded as the solution."""
    from kernellab.lessons import problems_of
    rel, src = _notebooks(e.lesson)
    nb, sol = notebook_of(e), S.filled(rel, src)
    problems = problems_of(e.lesson)
    p = problems[e.problem]
    untouched = [gid for gid, q in problems.items() if gid != e.problem
                 and sources_for(nb, q.names) == sources_for(sol, q.names)]
    outcome, record = harness.grade_problem(p, nb, seed, ceil, facts, e.lesson, limit_s=e.budget_s)
    score = harness.clamp_points(outcome.fraction, p.points)
    return {"name": e.name, "lesson": e.lesson, "problem": e.problem, "threat": e.threat, "expect": e.expect,
            "gpu": e.gpu, "score": score, "points": p.points, "why": outcome.message,
            "value": outcome.details.get("value"), "flagged": "flagged" in outcome.details,
            "untouched": untouched, "others": len(problems) - 1, "wall_s": round(record.get("wall_s", 0.0), 1)}


def verdict(r: dict, e: Entry) -> tuple[bool, str]:
    """(as expected, what was expected) for one graded entry."""
    if e.expect == "0":
        ok = r["score"] == 0 and (not e.says or e.says.lower() in r["why"].lower())
        want = "0" + (f", says '{e.says}'" if e.says else "")
    elif e.expect == "kernel":  # refused outright, or timed as the kernel it recorded: no inflated ratio
        ok = not r["flagged"] and (r["value"] is None and r["score"] == 0 or
                                   r["value"] is not None and r["value"] <= e.max_value)
        want = f"graded as its kernel: ratio <= {e.max_value:g}"
    elif e.expect == "full":
        ok, want = r["score"] == r["points"], "full points"
    else:  # earned: a speed verdict from a measured ratio, not flagged, not refused
        ok = r["value"] is not None and not r["flagged"] and r["score"] > 0
        want = "the points its ratio earns"
    return ok, want


def run(entries=None, progress: bool = True, seed: int = 20261122, jobs: int = 1) -> list[dict]:
    """Grade each entry (every one, or ``entries``), in order. ``jobs`` > 1 grades that many at once where no GPU
    times them (on a CPU nothing is timed, so they need no GPU alone): each in its own processes, as a class queue
    runs them (threads capped at their share of the cores). On a GPU entries are graded one at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from kernellab.ceilings import measure_ceilings
    from kernellab.learner import facts as device_facts
    from kernellab.grading.classroom.slots import GpuSlots
    todo = [e for e in (entries if entries is not None else ENTRIES) if runs_here(e)]
    ceil, facts = measure_ceilings(quiet=True), device_facts()
    jobs = 1 if DEVICE.on_gpu else max(1, min(int(jobs), len(todo) or 1))
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(todo), desc="corpus", file=sys.stdout)

    def one(e):
        r = grade_entry(e, seed, ceil, facts)
        r["ok"], r["wanted"] = verdict(r, e)
        if bar is not None:  # one line per entry, so a run cut short still says what it found
            bar.write(f"{'ok ' if r['ok'] else 'NOT'} {e.name}: {r['score']:g}/{r['points']:g} {r['why'][:150]}")
            bar.update(1)
        return r
    if jobs == 1:
        out = [one(e) for e in todo]
    else:
        with harness.use_slots(GpuSlots(1, jobs=jobs)), \
                ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="kl-corpus") as pool:
            out = list(pool.map(one, todo))
    if bar is not None:
        bar.close()
    return out


def write(results: list[dict], out: pathlib.Path) -> str:
    from kernellab.report import _header, md_table
    out.mkdir(parents=True, exist_ok=True)
    cheats = [r for r in results if r["expect"] in ("0", "kernel")]
    honest = [r for r in results if r["expect"] not in ("0", "kernel")]
    lines = ["# Cheat corpus and honest controls", ""] + _header() + ["", (
        "Each submission is the reference solution with one cell changed, graded by the grade of record (a worker "
        "records, a judge replays and times). 'untouched' counts the lesson's other problems whose cells it leaves as the "
        "solution has them: they are graded exactly as the solution is."), ""]
    for title, rows in (("Cheats", cheats), ("Honest controls", honest)):
        lines += [f"## {title}: {sum(r['ok'] for r in rows)} of {len(rows)} as expected", ""]
        lines += md_table(["submission", "lesson", "attacks", "threat", "expected", "got", "untouched", "why (first words)"], [
            [r["name"], r["lesson"][:2], r["problem"], r["threat"], r["wanted"],
             f"{r['score']:g}/{r['points']:g}" + ("" if r["ok"] else " ✗"), f"{len(r['untouched'])}/{r['others']}",
             r["why"][:110].replace("|", "/").replace("\n", " ")] for r in rows])
        lines.append("")
    text = "\n".join(lines)
    name = "corpus_gpu" if DEVICE.on_gpu else "corpus_cpu"
    (out / f"{name}.md").write_text(text)
    (out / f"{name}.json").write_text(json.dumps(results, indent=1, default=str))
    return text
