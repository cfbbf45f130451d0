"""A model of one GPU's grading under the class queue's slot rule (grading/classroom/slots.py), replayed from a run's records:
what a lesson's wall would be with the jobs in another order, or with another number of jobs at once.

    python autograder/benchmarks/slots_model.py records/kl-class-XXXX/logs-queue_1gpu [--slots 12]

Each job is what its record says it did: time outside its processes (the grading process's own work, holding
nothing), then each process (worker, judge, baseline judge) as spans holding the GPU shared or alone, in the
order its phases say ("alone" asked, "alone-go" given, "shared" handed back). The model keeps the rule and
nothing else: a process holding the GPU alone starts when no other holds it; while one waits, no shared hold
starts. Process times are the recorded ones, so the model ignores what more jobs at once cost the CPU: it says
what the rule alone does with the recorded work. On the 2026-11-26 records of lesson 02 on one H200 it reads
76.2 s against the measured 80.4 (assets/gpu/class_grading.md). With ``--paused-rate`` it models pausing
(grading/classroom/pause.py) as well: on the records of lesson 04 paused on one H200 (2026-11-27 13:15 UTC, 9 jobs, 52.8 s
measured) the queue's order reads 49.1 s at half speed for a paused process, and every other order it tries
51.3-63.2 s, so the queue keeps its order."""
from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from class_grading import PROCESSES, outside_processes, records  # noqa: E402


def process_spans(phases: list, end: float) -> list[tuple[str, float]]:
    """[(hold, seconds)] of one process from its phases ([[name, time], ...]): "shared" until it asked for its
    GPU alone, "alone" from "alone-go" until it handed the GPU back ("shared") or ended, "shared" again after
    "shared-go". A process that never asked shares the GPU throughout."""
    names = [p[0] for p in phases]
    start = float(phases[0][1])
    if "alone" not in names or "alone-go" not in names:
        return [("shared", end - start)]
    asked, given = float(phases[names.index("alone")][1]), names.index("alone-go")
    spans = [("shared", asked - start)]
    if "shared-go" in names[given:]:
        back = names.index("shared", given)
        spans.append(("alone", float(phases[back][1]) - float(phases[given][1])))
        spans.append(("shared", end - float(phases[names.index("shared-go", given)][1])))
    else:
        spans.append(("alone", end - float(phases[given][1])))
    return spans


def jobs_from_records(logs: pathlib.Path) -> list[dict]:
    """Each job of a mode's records (logs-MODE/<student>/<lesson>/<problem>/result.json), in the order they
    started: {"timed": asked for its GPU alone, "outside": seconds holding nothing, "procs": [spans, ...]}."""
    jobs = []
    for r in sorted((r for _, r in records(pathlib.Path(logs)) if r.get("job_span")), key=lambda r: r["job_span"][0]):
        procs = []
        for pre, _ in PROCESSES:
            phases = r.get(f"{pre}phases")
            if not phases:
                continue
            end = float(phases[-1][1])
            if phases[-1][0] == "end":
                phases = phases[:-1]
            if phases:
                procs.append(process_spans(phases, end))
        timed = any(h == "alone" for p in procs for h, _ in p)
        jobs.append({"timed": timed, "outside": outside_processes(r), "procs": procs})
    return jobs


def simulate(jobs: list[dict], slots: int, dt: float = 0.01, later_jump: bool = False,
             paused_rate: float | None = None) -> float:
    """Seconds to grade ``jobs`` in this order, ``slots`` at once, under the slot rule (FIFO among waiting
    timed holds). ``later_jump``: a rule not built, modelled: a job's later processes (its judges, short) may
    start shared while a timed hold waits, as its first may not. ``paused_rate``: the pausing rule
    (grading/classroom/pause.py) instead of draining: a timed hold waits only for another timed hold, shared holds start
    and go on beside it, at this fraction of their speed (a locked process runs its CPU work on until its next
    CUDA call: 0 stops it at once, 1 never)."""
    todo, running, t = list(jobs), [], 0.0
    shared, alone, waiting = 0, False, []
    pausing = paused_rate is not None

    def start(job):
        steps = [("outside", job["outside"])]
        for proc in job["procs"]:
            steps += list(proc) + [("end", 0.0)]
        return {"steps": steps, "i": 0, "left": steps[0][1], "hold": None, "wants": None, "ended": 0}

    while todo or running:
        while todo and len(running) < slots:
            running.append(start(todo.pop(0)))
        for j in list(running):
            if j["wants"] == "shared":
                if not pausing and (alone or (waiting and not (later_jump and j["ended"]))):
                    continue
                shared, j["hold"], j["wants"] = shared + 1, "shared", None
            elif j["wants"] == "alone":
                if alone or (shared and not pausing) or waiting[0] is not j:
                    continue
                waiting.pop(0)
                alone, j["hold"], j["wants"] = True, "alone", None
            j["left"] -= dt * (paused_rate if pausing and alone and j["hold"] != "alone" else 1.0)
            while j["left"] <= 0 and j["wants"] is None:
                j["i"] += 1
                if j["i"] >= len(j["steps"]):
                    running.remove(j)
                    break
                kind, seconds = j["steps"][j["i"]]
                j["left"] += seconds
                if kind == "end":  # the process ends: its hold goes
                    shared -= j["hold"] == "shared"
                    alone = alone and j["hold"] != "alone"
                    j["hold"] = None
                    j["ended"] += 1
                elif kind == "shared" and j["hold"] == "alone":  # handed back with no gap (GpuSlots.share)
                    alone, shared, j["hold"] = False, shared + 1, "shared"
                elif kind == "shared" and j["hold"] is None:
                    j["wants"] = "shared"
                elif kind == "alone":
                    shared -= j["hold"] == "shared"
                    j["hold"], j["wants"] = None, "alone"
                    waiting.append(j)
        t += dt
    return t


def orders(jobs: list[dict]) -> dict:
    """The jobs in the orders worth comparing: the queue's (untimed, then timed), timed first, timed after a
    share of the untimed, and timed interleaved with them."""
    untimed, timed = [j for j in jobs if not j["timed"]], [j for j in jobs if j["timed"]]
    out = {"untimed, then timed (the queue's)": untimed + timed, "timed first": timed + untimed}
    for share in (0.25, 0.5, 0.75):
        k = int(len(untimed) * share)
        out[f"timed after {share:.0%} of the untimed"] = untimed[:k] + timed + untimed[k:]
    for every in (2, 3, 4):
        mixed, u, tq = [], list(untimed), list(timed)
        while u or tq:
            mixed += [u.pop(0) for _ in range(every - 1) if u]
            if tq:
                mixed.append(tq.pop(0))
        out[f"one timed in every {every}"] = mixed
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", help="a mode's records of one lesson on one GPU (logs-MODE, from a run's records.tgz)")
    ap.add_argument("--slots", type=int, default=12, help="jobs at once (the run's)")
    ap.add_argument("--paused-rate", default="", help="also model pausing instead of draining, at these speeds of "
                    "a paused process (comma-separated fractions, e.g. 0,0.5,1)")
    a = ap.parse_args()
    jobs = jobs_from_records(pathlib.Path(a.logs))
    print(f"{len(jobs)} jobs ({sum(j['timed'] for j in jobs)} timed), {a.slots} at once")
    print(f"  {'as recorded':40s} {simulate(jobs, a.slots):6.1f} s")
    print(f"  {'as recorded, judges past a waiting timer':40s} {simulate(jobs, a.slots, later_jump=True):6.1f} s")
    rates = [None] + [float(r) for r in a.paused_rate.split(",")] if a.paused_rate else [None]
    print(f"  {'':40s} " + " ".join(f"{'drain' if r is None else f'pause {r:g}':>9s}" for r in rates))
    for name, ordered in orders(jobs).items():
        print(f"  {name:40s} " + " ".join(f"{simulate(ordered, a.slots, paused_rate=r):7.1f} s" for r in rates))


if __name__ == "__main__":
    main()
