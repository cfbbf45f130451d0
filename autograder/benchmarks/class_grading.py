"""Grade a synthetic class three ways and say how long each took: serially (one notebook after another, as
nbgrader alone does), by the local queue (``kernellab term autograde``'s), and by Ray on a local cluster of
this machine. Writes ``class_grading.json`` and ``class_grading.md``.

    python autograder/benchmarks/class_grading.py --modes queue --lessons 01_roofline_vector_add,02_tiled_matmul --part a
    python autograder/benchmarks/class_grading.py --merge part_a.json part_b.json ... --out assets/gpu
    python autograder/benchmarks/class_grading.py --timeline records/kl-class-XXXX/logs-queue_2gpu --out /tmp/t

The class, per lesson (``--per-lesson``, default 10): copies of the solution, the honest controls of the cheat
corpus (correct submissions written differently), known-wrong submissions, cheats from the corpus and the blank
release. Every submission has all of its lesson's problems graded. ``--serial-per-lesson`` grades only the
first few of each lesson serially (the serial path is the slow one being replaced; its time per submission is
what the comparison needs). Runs too long for one sitting can be split by lesson and mode (``--part``) and
merged. Scores are compared problem by problem across modes, speed ratios by their relative difference.

Modes: ``serial``; ``queue`` and ``ray_local`` (every GPU of the machine); ``queue_<N>gpu`` and ``ray_<N>gpu`` (N of
its GPUs: a run of one GPU beside one of two on the same machine says what the second GPU pays). Each mode's
record says the machine it ran on (GPUs, cores), as parts from several machines can be merged.

Speed under load: ``--load-copies N`` adds N copies of the first lesson's solution to its class, and
``--quiet-regrades N`` first regrades that solution's speed problems N times with nothing else running; the report
sets the copies' speed ratios, measured while the rest of the class was graded beside them, against the quiet
ones. Every run also counts, from the records, the grading processes that held a GPU while another timed on it
(``holds_beside_timing``: the rule of grading/classroom/slots.py says none).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import re
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "autograder"))

LESSONS = ["01_roofline_vector_add", "02_tiled_matmul", "03_fused_softmax_layernorm", "04_flash_attention"]


def mode_spec(mode: str) -> tuple[str, int | None]:
    """(backend, GPUs) of a mode: serial, queue or ray, on every GPU (None) or on N of them. ``serial_1gpu`` is
    serial grading (one GPU in any case) named for a machine whose other modes are ``_<N>gpu`` ones, so that
    they are set against serial grading of their own machine (``serial_for``). ``queue_<N>gpu_<K>cores``: on K of
    the machine's cores (run under ``taskset``; ``mode_cores``)."""
    if mode in ("serial", "queue"):
        return mode, None
    if mode == "ray_local":
        return "ray", None
    nodes = re.fullmatch(r"ray_([1-9][0-9]*)nodes", mode)
    if nodes:  # a Ray node per GPU of this machine, each with its share of the cores (cluster.start_nodes)
        return "ray_nodes", int(nodes[1])
    m = re.fullmatch(r"(queue|ray)_([1-9][0-9]*)gpu(?:_[1-9][0-9]*cores)?|(serial)_(1)gpu", mode)
    if not m:
        raise SystemExit(f"unknown mode {mode!r}: serial, queue, ray_local, queue_<N>gpu, ray_<N>gpu (each may end "
                         "_<K>cores), ray_<N>nodes or serial_1gpu")
    return (m[1], int(m[2])) if m[1] else (m[3], 1)


def mode_cores(mode: str) -> int | None:
    """The CPU cores a ``_<K>cores`` mode is given (a share of the machine's, as a node with fewer cores per GPU
    would have), else None: all of them."""
    m = re.search(r"_([1-9][0-9]*)cores$", mode)
    return int(m[1]) if m else None


def serial_for(res: dict, mode: str) -> str | None:
    """The serial grading a mode is set against: ``serial_1gpu`` for a ``_<N>gpu`` mode where the report has it
    (the same machine), else ``serial``; None where the report has neither."""
    if mode_spec(mode)[1] is not None and "serial_1gpu" in res["modes"]:
        return "serial_1gpu"
    return "serial" if "serial" in res["modes"] else None


def build_class(lesson: str, n: int) -> dict:
    """student -> notebook: a class of ``n`` for ``lesson`` (the mix the module docstring describes)."""
    from kernellab.grading import corpus as C
    from kernellab.grading.instructor import submissions as S
    rel, src = C._notebooks(lesson)
    honest = [e for e in C.ENTRIES if e.lesson == lesson and e.honest][:2]
    cheats = [e for e in C.ENTRIES if e.lesson == lesson and not e.honest and not e.budget_s][:2]
    wrong = list(S.known_wrong(lesson, src).items())[:2]
    subs = {"solution-1": S.filled(rel, src)}
    subs |= {f"cheat-{e.name}": C.notebook_of(e) for e in cheats}
    subs |= {f"wrong-{name}": S.filled(rel, src, edit) for name, edit in wrong}
    subs |= {f"honest-{e.name}": C.notebook_of(e) for e in honest}
    subs["blank"] = rel
    k = 2
    while len(subs) < n:
        subs[f"solution-{k}"] = S.filled(rel, src)
        k += 1
    return dict(list(subs.items())[:n])


def records(logs: pathlib.Path, lesson: str = "*"):
    """(student/lesson/problem, audit record) of every grading of a run (``logs``: student/lesson/problem/result.json);
    a record that cannot be read is skipped."""
    for f in sorted(logs.glob(f"*/{lesson}/*/result.json")):
        try:
            yield "/".join(f.parts[-4:-1]), json.loads(f.read_text())
        except (OSError, ValueError):
            continue


# A record's key prefix for each of a job's grading processes, and what it ran: harness.PROCESSES, repeated here so
# that reports are made from parts without importing kernellab, which needs torch (a test keeps the two the same).
PROCESSES = (("", "worker"), ("judge_", "judge"), ("baseline_", "baseline"))


def each_process(r: dict, key: str) -> list:
    """``key``'s value for each grading process of the job record ``r`` (harness.each_process)."""
    return [r.get(f"{pre}{key}") for pre, _ in PROCESSES]


def outside_processes(r: dict) -> float | None:
    """Seconds of a job (an audit record) spent outside its grading processes and their waits for a GPU: the
    grading process's own work (cases, references, judging); None for a record without its job's span."""
    if not r.get("job_span"):
        return None
    inside = sum(float(r[f"{pre}wall_s"]) + float(r.get(f"{pre}slot_wait_s") or 0)
                 for pre, _ in PROCESSES if f"{pre}wall_s" in r)
    return max(0.0, float(r["job_span"][1]) - float(r["job_span"][0]) - inside)


def _short_of_full(lesson: str, results: dict) -> dict:
    """lesson/student/problem -> what the grade said, for every problem graded below its points: a solution copy
    that loses points in one mode and not in another must say why in the part's JSON (2026-11-29: lesson 02's
    solution lost matmul_correct in 3 of 15 gradings, and only the scores were kept)."""
    return {f"{lesson}/{s}/{gid}": str(r[2])[:400] for s, res in results.items() for gid, r in res.items()
            if len(r) > 2 and r[0] < r[1]}


def _ratios(logs: pathlib.Path, lesson: str) -> dict:
    """(student, problem) -> the speed ratio a grading measured (from the audit records)."""
    out = {}
    for _, r in records(logs, lesson):
        v = (r.get("details") or {}).get("value")
        if r.get("kind") == "speed" and isinstance(v, (int, float)):
            out[f"{r['student']}/{r['problem']}"] = v
    return out


def _medians(logs: pathlib.Path, lesson: str) -> tuple[dict, dict]:
    """(student, problem) -> [the learner's median ms, the baseline's median ms] behind each speed ratio, and
    (student, problem) -> the GPU's state (clocks, power, the driver's reasons) before and after that timing."""
    medians, states = {}, {}
    for _, r in records(logs, lesson):
        d = r.get("details") or {}
        if r.get("kind") == "speed" and isinstance(d.get("cand_ms_median"), (int, float)):
            key = f"{r['student']}/{r['problem']}"
            medians[key] = [round(d["cand_ms_median"], 5), round(d["base_ms_median"], 5)]
            if r.get("gpu_state"):
                states[key] = r["gpu_state"]
    return medians, states


def _holds_by_gpu(logs: pathlib.Path) -> dict:
    """GPU (node/slot on Ray, slot in the queue) -> [(start, end, alone)] of every grading process's holds: each
    process's holds on its GPU (slots: [start, end, alone]) are in its problem's record, the worker's, the judge's
    and a baseline's, with the GPU's slot and, on Ray, the node. A shared hold is cut where its process was paused
    for another's timing (the record's ``paused`` spans, grading/classroom/pause.py): paused, it held nothing."""
    holds = {}
    for _, r in records(logs):
        for pre, _ in PROCESSES:
            key = f"{r.get('node') + '/' if r.get('node') else ''}{r.get(f'{pre}gpu_slot')}"
            paused = r.get(f"{pre}paused") or []
            for start, end, alone in r.get(f"{pre}holds") or []:
                for a, b in ([(start, end)] if alone else _minus((float(start), float(end)), paused)):
                    holds.setdefault(key, []).append((float(a), float(b), bool(alone)))
    return dict(sorted(holds.items()))


def _minus(span: tuple, cuts: list) -> list:
    """The parts of ``span`` (start, end) outside every one of ``cuts`` ([start, end])."""
    parts = [span]
    for c0, c1 in sorted(cuts):
        parts = [piece for a, b in parts for piece in ((a, min(b, c0)), (max(a, c1), b)) if piece[1] > piece[0]]
    return parts


def timing_overlaps(logs: pathlib.Path) -> tuple[int, int]:
    """(timed holds, other holds of a grading process on the same GPU while one timed), from a run's records."""
    timed = bad = 0
    for hs in _holds_by_gpu(logs).values():
        for i, (s, e, alone) in enumerate(hs):
            if alone:
                timed += 1
                bad += sum(1 for j, (s2, e2, _) in enumerate(hs) if j != i and s2 < e and e2 > s)
    return timed, bad


def _union(spans: list) -> float:
    """Seconds covered by a set of (start, end) intervals (overlaps counted once)."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def _at_once(spans: list) -> float:
    """How many of ``spans`` ((start, end)) ran at once on average, from the first start to the last end."""
    return round(sum(b - a for a, b in spans) / max(1e-9, max(b for _, b in spans) - min(a for a, _ in spans)), 2)


def gpu_timeline(logs: pathlib.Path) -> dict:
    """Per GPU (node/slot on Ray, slot in the queue), from every grading process's holds: span_s from its first
    hold to its last, held_s covered by any hold, alone_s by a hold alone (a judge timing, a worker tuning). Where
    alone_s is most of span_s the serial steps on the GPU bound the run and another GPU shortens it; where held_s
    is well short of span_s, the GPU waited for the CPU side (starting, compiling) or for the queue's tail."""
    out = {}
    for key, hs in _holds_by_gpu(logs).items():
        out[key] = {"span_s": round(max(e for _, e, _ in hs) - min(s for s, _, _ in hs), 1),
                    "held_s": round(_union([(s, e) for s, e, _ in hs]), 1),
                    "alone_s": round(_union([(s, e) for s, e, al in hs if al]), 1)}
    return out


def busy_by_hold(logs: pathlib.Path, series: dict, gpu_of_slot: dict | None = None) -> dict:
    """Mean GPU busy % of the samples (``series``: sampled GPU -> [[time, percent]], GpuUsage.series) taken while
    the GPU was held alone (a tuning or a timing), held only shared, or not held, with how many samples each:
    whether the serial steps keep the GPU busy. ``gpu_of_slot``: the queue's slot -> sampled GPU (Ray's records name
    the GPU; a node's prefix is dropped, for a local cluster's one node)."""
    spans = {}
    for key, hs in _holds_by_gpu(logs).items():
        slot = key.rsplit("/", 1)[-1]
        spans[str((gpu_of_slot or {}).get(slot, slot))] = hs
    acc = {"alone": [], "shared": [], "not_held": []}
    for gpu, samples in series.items():
        hs = spans.get(str(gpu), [])
        for t, pct in samples:
            here = [al for s, e, al in hs if s <= t < e]
            acc["alone" if any(here) else "shared" if here else "not_held"].append(float(pct))
    return {k: {"busy_pct": round(sum(v) / len(v), 1) if v else None, "samples": len(v)} for k, v in acc.items()}


def plot_timeline(logs: pathlib.Path, path: pathlib.Path) -> bool:
    """One lane per GPU over the run: how many grading processes shared it (a step line) and when one held it
    alone (red spans) - where the run's tail is, and whether a GPU sat idle while another timed. False with no
    holds in the records."""
    holds = _holds_by_gpu(logs)
    if not holds:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    t0 = min(s for hs in holds.values() for s, _, _ in hs)
    fig, axes = plt.subplots(len(holds), 1, figsize=(10, 1.2 + 1.6 * len(holds)), sharex=True, squeeze=False)
    for ax, (gpu, hs) in zip(axes[:, 0], holds.items()):
        events = sorted([(s - t0, 1) for s, _, al in hs if not al] + [(e - t0, -1) for _, e, al in hs if not al])
        xs, ys, n = [0.0], [0], 0
        for t, d in events:
            n += d
            xs.append(t)
            ys.append(n)
        ax.step(xs, ys, where="post", lw=0.9, label="processes sharing the GPU")
        for s, e, al in hs:
            if al:
                ax.axvspan(s - t0, e - t0, color="tab:red", alpha=0.35, lw=0)
        ax.set_ylabel(f"GPU {gpu}", fontsize=8)
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes[0, 0].set_title("GPU holds over the run (red: one process alone, timing or tuning)", fontsize=9)
    axes[-1, 0].set_xlabel("seconds from the first hold")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def process_seconds(logs: pathlib.Path) -> dict:
    """Seconds the run's grading processes took, summed by kind (worker, judge, baseline judge), and how long they
    waited for their GPU (slot_wait_s), with how many workers asked for their GPU alone to autotune; on Ray also the
    seconds inside its graders per job (task_s) and how many ran at once on average (tasks_at_once); where a run had several
    GPUs, how many problems each graded (problems_per_gpu); in any mode, how many jobs had a grading process
    holding its GPU at once on average (jobs_at_once: each job from its first hold to its last); and the jobs'
    seconds from start to end (job_s), of which the grading process's own work outside its processes (grader_s)."""
    out, tasks, on_gpu, jobs = {"workers_alone": 0}, [], {}, []
    for _, r in records(logs):
        spans = [h for holds in each_process(r, "holds") for h in holds or []]
        if spans:  # a job's first hold to its last: how many jobs had a process running, queue or Ray alike
            jobs.append((min(float(h[0]) for h in spans), max(float(h[1]) for h in spans)))
        if r.get("gpu_slot") is not None:  # problems per GPU (did the jobs spread over every GPU?)
            on_gpu[str(r["gpu_slot"])] = on_gpu.get(str(r["gpu_slot"]), 0) + 1
        for pre, name in PROCESSES:  # the job's processes' walls and their waits for a GPU
            if f"{pre}wall_s" in r:
                out[f"{name}_s"] = round(out.get(f"{name}_s", 0.0) + float(r[f"{pre}wall_s"]), 1)
                out["slot_wait_s"] = round(out.get("slot_wait_s", 0.0) + float(r.get(f"{pre}slot_wait_s") or 0), 1)
        outside = outside_processes(r)
        if outside is not None:  # the rest of the job: the grading process's own work (cases, references, judging)
            out["job_s"] = round(out.get("job_s", 0.0) + float(r["job_span"][1]) - float(r["job_span"][0]), 1)
            out["grader_s"] = round(out.get("grader_s", 0.0) + outside, 1)
        out["workers_alone"] += any(span[2] for span in r.get("holds") or [])
        for pre, name in (("", "worker"), ("judge_", "judge")):  # what a process did once it had its GPU alone
            for phase, secs in alone_phases(r.get(f"{pre}phases") or []).items():
                by = out.setdefault("alone_phase_s", {}).setdefault(name, {})
                by[phase] = round(by.get(phase, 0.0) + secs, 1)
        if r.get("task_started") and r.get("task_ended"):
            tasks.append((float(r["task_started"]), float(r["task_ended"])))
    if jobs:
        out["jobs_at_once"] = _at_once(jobs)
    if len(on_gpu) > 1:
        out["problems_per_gpu"] = dict(sorted(on_gpu.items()))
    if tasks:  # Ray: seconds inside tasks, and how many ran at once
        out["task_s"] = round(sum(b - a for a, b in tasks), 1)
        out["tasks_at_once"] = _at_once(tasks)
    return out


def alone_phases(phases: list) -> dict:
    """Seconds per phase a grading process spent once it had its GPU alone: its record's ``phases`` ([phase,
    time], ending with "end") from "alone-go" until it gave the GPU back ("shared": a tuning worker once its
    tuning is timed) or ended. A tuning worker's are "compile" (tuning; before the GPU was given back after
    tuning, "run" too: recording its call), a judge's what it times in; "alone-go" is the moment until it
    heard. Empty if it never asked."""
    marks = [p[0] for p in phases]
    if "alone-go" not in marks:
        return {}
    start = marks.index("alone-go")
    end = marks.index("shared", start) + 1 if "shared" in marks[start:] else len(phases)
    after, out = phases[start:end], {}
    for (phase, t0), (_, t1) in zip(after, after[1:]):
        out[phase] = out.get(phase, 0.0) + float(t1) - float(t0)
    return out


def weighted_busy(busy: list, per_gpu: dict) -> tuple:
    """(mean, {GPU: mean}) of GPU busy %, each reading weighted by the seconds it covers: ``busy`` [(percent,
    seconds)] and ``per_gpu`` {GPU: [(percent, seconds)]}, from a mode's lessons or a merge's parts."""
    def mean(pairs):
        t = sum(s for _, s in pairs)
        return round(sum(u * s for u, s in pairs) / t, 1) if t else None
    return mean(busy), {g: v for g, pairs in per_gpu.items() if (v := mean(pairs)) is not None}


def speed_spread(values: list[float]) -> dict:
    """n, min, median, max and spread of measured speed ratios (regrade.ratio_range), rounded for the report."""
    from kernellab.grading.instructor.regrade import ratio_range
    if not values:
        return {"n": 0}
    r = ratio_range(values)
    return {"n": len(values), **{k: round(r[f"value_{k}"], 4) for k in ("min", "median", "max")},
            "spread": round(r["spread"], 4) if r["spread"] is not None else None}


def run(modes: list[str], lessons: list[str], per_lesson: int, serial_per_lesson: int, jobs: int | None,
        after_mode=None, load_copies: int = 0, quiet: int = 0) -> dict:
    """``load_copies``: that many more copies of the first lesson's solution in its class, whose speed ratios,
    measured while the class is graded beside them, are set against ``quiet`` regrades of the same problems
    with nothing else running (before any mode)."""
    from kernellab.grading.classroom import classqueue
    from kernellab.grading.judge import harness
    from kernellab.grading.instructor import submissions as S
    from kernellab.grading.classroom.gpu_usage import GpuUsage, own_gpu
    from kernellab.grading.judge.secret import course_secret
    from kernellab.grading.judge.store import Store
    work = pathlib.Path(tempfile.mkdtemp(prefix="kl-class-"))
    course = work / "course"
    classes = {lesson: build_class(lesson, per_lesson) for lesson in lessons}
    load_lesson = lessons[0]
    if load_copies:
        from kernellab.grading import corpus as C
        rel, src = C._notebooks(load_lesson)
        classes[load_lesson] |= {f"load-{k}": S.filled(rel, src) for k in range(1, load_copies + 1)}
    for lesson, subs in classes.items():
        for student, nb in subs.items():
            d = course / "submitted" / student / lesson
            d.mkdir(parents=True, exist_ok=True)
            S.write(nb, d / f"{lesson}.ipynb")
    secret = course_secret(course)
    from kernellab.report import _header
    out = {"lessons": lessons, "per_lesson": per_lesson, "modes": {}, "scores": {}, "ratios": {},
           "header": _header(), "load_copies": {load_lesson: load_copies} if load_copies else {}}
    if quiet:
        from kernellab.grading.instructor.regrade import regrade
        t0 = time.monotonic()
        res = regrade(load_lesson, ["speed"], times=quiet, progress=True)
        out["quiet"] = {"lesson": load_lesson, "wall_s": round(time.monotonic() - t0, 1),
                        "values": {pid: r["values"] for pid, r in res.items()},
                        "scores": {pid: r["scores"] for pid, r in res.items()}}
        if after_mode is not None:
            after_mode(out)
    on_machine = machine()["gpus"]
    for mode in modes:
        backend, n_gpus = mode_spec(mode)
        if n_gpus and harness.DEVICE.on_gpu and n_gpus > on_machine:
            raise SystemExit(f"{mode}: this machine has {on_machine} GPU(s)")
        given, usable = mode_cores(mode), machine()["cores"]
        if given and given != usable:
            raise SystemExit(f"{mode}: run it on {given} cores (taskset -c 0-{given - 1}); this process may use {usable}")
        mode_jobs = jobs or (classqueue.default_jobs(n_gpus) if backend != "serial" else 1)
        logs = work / f"logs-{mode}"
        scores, said, students, problems, regraded = {}, {}, 0, 0, []
        busy, gpus, grader_cpu = [], 0, 0.0  # (GPU busy %, seconds) of each class run: grade_class samples the GPU
        pauses = [0, 0]  # processes paused for timings, and timings that waited for one to become pausable
        series, slot_map = {}, {}  # each GPU's busy samples in time, and the queue's slot -> sampled GPU
        per_gpu = {}  # GPU -> [(busy %, seconds)] of each class run
        t0 = time.monotonic()
        ray_started = False
        # Serial grading computes on one GPU: sampled alone, not averaged with idle others.
        with GpuUsage(gpus=[own_gpu()]) if backend == "serial" else contextlib.nullcontext() as usage:
            if backend in ("ray", "ray_nodes"):
                import ray

                from kernellab.grading.classroom.cluster import NODES, connect
                # one cluster for the mode's lessons, told of the mode's GPUs as grade_class would tell it
                ray_started = connect("local", mode_jobs, classqueue.ray_local_init(n_gpus)) if backend == "ray" \
                    else connect(NODES, mode_jobs, {"nodes": n_gpus, "gpus": harness.DEVICE.on_gpu})
            for lesson, subs in classes.items():
                if backend == "serial":
                    for student in list(subs)[:serial_per_lesson]:
                        nb = S.read(course / "submitted" / student / lesson / f"{lesson}.ipynb")
                        res = harness.grade_notebook(nb, lesson, student, secret, logs_dir=logs, progress=False)
                        scores |= {f"{lesson}/{student}/{gid}": r[0] for gid, r in res.items()}
                        said |= _short_of_full(lesson, {student: res})
                        students += 1
                        problems += len(res)
                        print(f"serial {lesson} {student}: {time.monotonic() - t0:.0f} s", flush=True)
                    continue
                summary = classqueue.grade_class(course, lesson, jobs=mode_jobs, progress=True,
                                                 store=Store(work / f"store-{mode}"), logs_dir=logs,
                                                 gpus=n_gpus, ray={"ray": "local", "ray_nodes": "nodes"}.get(backend))
                print(classqueue.describe(summary), flush=True)
                for f in summary["failures"]:  # what the failed process said, for the log
                    student, pid = f.split(":", 1)[0].split("/")
                    rec = logs / student / lesson / pid / "result.json"
                    if rec.exists():
                        r = json.loads(rec.read_text())
                        print(f"--- {f[:80]}\n{r.get('child_log_tail', '')[-1200:]}\n{r.get('judge_log_tail', '')[-600:]}")
                students += summary["students"]
                problems += summary["jobs"]
                regraded += [f"{lesson}/{k}" for k in summary.get("regraded_alone", [])]
                gpus = summary["gpus"]
                grader_cpu += summary.get("grader_cpu_s") or 0.0
                pauses[0] += summary.get("paused") or 0
                pauses[1] += summary.get("waited_for") or 0
                for g, samples in (summary.get("gpu_busy_series") or {}).items():
                    series.setdefault(g, []).extend(samples)
                slot_map |= summary.get("gpu_of_slot") or {}
                if summary["gpu_util_mean"] is not None:
                    busy.append((summary["gpu_util_mean"], summary["seconds"]))
                for g, u in (summary.get("gpu_util_per_gpu") or {}).items():
                    per_gpu.setdefault(str(g), []).append((u, summary["seconds"]))
                scores |= {f"{lesson}/{s}/{gid}": r[0] for s, res in summary["results"].items() for gid, r in res.items()}
                said |= _short_of_full(lesson, summary["results"])
            if ray_started:
                ray.shutdown()
                from kernellab.grading.classroom.cluster import stop_nodes
                stop_nodes()
        wall = time.monotonic() - t0
        if backend == "serial":
            util, gpus = usage.mean(), 1 if harness.DEVICE.on_gpu else 0  # one GPU, however many the machine has
        else:
            util, per_gpu = weighted_busy(busy, per_gpu)
        out["modes"][mode] = {"wall_s": round(wall, 1), "students": students, "problems": problems, "gpus": gpus,
                              "gpu_util_mean": util, "per_student_s": round(wall / max(1, students), 1),
                              "jobs": mode_jobs, "machine": machine(),
                              "gpu_util_per_gpu": per_gpu}
        if backend != "serial":
            out["modes"][mode]["timed_holds"], out["modes"][mode]["holds_beside_timing"] = timing_overlaps(logs)
            out["modes"][mode]["regraded_alone"] = regraded
            # untimed processes paused for timings, and timings that waited for one to become pausable (grading/classroom/pause.py)
            out["modes"][mode]["paused"], out["modes"][mode]["waited_for"] = pauses
            out["modes"][mode]["pinned_cores"] = pinned_cores(logs)
            out["modes"][mode]["process_s"] = process_seconds(logs) | {"grader_cpu_s": round(grader_cpu, 1)}
            out["modes"][mode]["gpu_timeline"] = gpu_timeline(logs)
            if series:
                out["modes"][mode]["gpu_busy_by_hold"] = busy_by_hold(logs, series, slot_map)
        # Timed runs whose allocations failed until the allocator freed its cache (memory short beside others)
        out["modes"][mode]["alloc_retries"] = short_of_memory(logs)
        out["scores"][mode] = scores
        out.setdefault("messages", {})[mode] = said
        out["ratios"][mode] = {f"{lesson}/{k}": v for lesson in lessons for k, v in _ratios(logs, lesson).items()}
        for lesson in lessons:
            for field, got in zip(("medians_ms", "gpu_states"), _medians(logs, lesson)):
                out.setdefault(field, {}).setdefault(mode, {}).update({f"{lesson}/{k}": v for k, v in got.items()})
        if after_mode is not None:  # a run cut short by its time limit keeps the modes it finished
            after_mode(out)
    return out


def machine() -> dict:
    """The machine a mode ran on: its GPU, how many GPUs and CPU cores it has."""
    from kernellab.grading.classroom import classqueue
    from kernellab.grading.judge import harness
    from kernellab.grading.classroom.cores import usable  # the cores it ran on (a taskset gives a mode fewer)
    return {"gpu": harness.DEVICE.name if harness.DEVICE.on_gpu else "none (CPU)",
            "gpus": classqueue.gpu_count() if harness.DEVICE.on_gpu else 0, "cores": usable()}


def pinned_cores(logs: pathlib.Path) -> dict:
    """How many grading processes ran on kept cores (grading/classroom/cores.py), from the records: untimed ones pinned off
    the timing cores ("start"), timed ones on them ("timed"), with the cores each kind had."""
    out = {"start": 0, "timed": 0, "start_cores": [], "timed_cores": []}
    for _, r in records(logs):
        for kept in each_process(r, "cores"):
            for kind, cores in (kept or {}).items():
                out[kind] += 1
                if cores not in out[f"{kind}_cores"]:
                    out[f"{kind}_cores"].append(cores)
    return out


def short_of_memory(logs: pathlib.Path) -> dict:
    """student/lesson/problem -> allocator retries in its timed runs (the learner's replay and the baseline), from
    each grading's record; only those with any."""
    out = {}
    for key, r in records(logs):
        n = (r.get("alloc_retries") or 0) + (r.get("baseline_alloc_retries") or 0)
        if n:
            out[key] = n
    return out


def merge(parts: list[dict]) -> dict:
    """Parts split by lesson and mode, as one result: walls, counts and GPU busy summed (busy weighted by wall)."""
    out = {"lessons": sorted({ls for p in parts for ls in p["lessons"]}), "modes": {}, "scores": {}, "ratios": {},
           "per_lesson": parts[0]["per_lesson"], "header": next((p["header"] for p in parts if p.get("header")), None),
           "by_lesson": {},
           "quiet": next((dict(p["quiet"], modes=list(p["modes"])) for p in parts if p.get("quiet")), None),
           "load_copies": {k: v for p in parts for k, v in (p.get("load_copies") or {}).items()}}
    for p in parts:
        for mode, m in p["modes"].items():
            acc = out["modes"].setdefault(mode, {"wall_s": 0.0, "students": 0, "problems": 0, "gpus": m["gpus"],
                                                 "_busy": [], "_per_gpu": {},
                                                 "jobs": 1 if mode_spec(mode)[0] == "serial" else m["jobs"]})
            if m.get("machine"):
                acc["machine"] = m["machine"]
            acc["gpu_model"] = acc.get("gpu_model") or (m.get("machine") or {}).get("gpu") or gpu_in_header(p.get("header"))
            for g, u in (m.get("gpu_util_per_gpu") or {}).items():
                acc["_per_gpu"].setdefault(g, []).append((u, m["wall_s"]))
            acc["wall_s"] += m["wall_s"]
            if len(p["lessons"]) == 1:  # one lesson in this part: its own row
                out["by_lesson"].setdefault(p["lessons"][0], {})[mode] = {
                    "submissions": m["students"], "per_student_s": m["per_student_s"], "gpu_util_mean": m["gpu_util_mean"],
                    "wall_s": m["wall_s"], **part_bound(m)}
            acc["students"] += m["students"]
            acc["problems"] += m["problems"]
            for k in ("timed_holds", "holds_beside_timing"):
                if k in m:
                    acc[k] = acc.get(k, 0) + m[k]
            if m["gpu_util_mean"] is not None:
                acc["_busy"].append((m["gpu_util_mean"], m["wall_s"]))
            out["scores"].setdefault(mode, {}).update(p["scores"][mode])
            out.setdefault("messages", {}).setdefault(mode, {}).update((p.get("messages") or {}).get(mode, {}))
            out["ratios"].setdefault(mode, {}).update(p["ratios"][mode])
            for field in ("medians_ms", "gpu_states"):  # what stands behind each ratio, where a part has it
                if (p.get(field) or {}).get(mode):
                    out.setdefault(field, {}).setdefault(mode, {}).update(p[field][mode])
    for m in out["modes"].values():
        m["gpu_util_mean"], per_gpu = weighted_busy(m.pop("_busy"), m.pop("_per_gpu"))
        if per_gpu:
            m["gpu_util_per_gpu"] = per_gpu
        m["per_student_s"] = round(m["wall_s"] / max(1, m["students"]), 1)
        m["wall_s"] = round(m["wall_s"], 1)
    return out


def part_bound(m: dict) -> dict:
    """What ``bounds`` needs of one part's mode, where its records had it: alone_s, the seconds the busiest GPU was
    held alone (timings and tunings: one after another on a GPU); process_s, the seconds its grading processes ran
    (workers and judges, their waits included); jobs, how many at a time."""
    timeline, procs = m.get("gpu_timeline") or {}, m.get("process_s") or {}
    if not timeline or not procs:
        return {}
    return {"alone_s": max(float(g["alone_s"]) for g in timeline.values()),
            "process_s": round(sum(float(procs.get(f"{name}_s", 0.0)) for _, name in PROCESSES), 1),
            "jobs": m["jobs"]}


def bounds(res: dict) -> list[str]:
    """The report's section on what bounds each part: its wall against alone_s + process_s / jobs (``part_bound``),
    the time its GPUs' serial steps take plus its processes' seconds spread over the jobs that run at once. Where a
    mode of N GPUs and the one-GPU queue graded the same lessons it says how far the processes' seconds would have to
    fall for N GPUs to reach 0.85 N of one GPU's throughput: N GPUs divide alone_s by N, but process_s only by the
    jobs more GPUs can run at once, and those grew with the jobs on a host of the same cores (``res["bounds"]``)."""
    from kernellab.report import md_table
    rows, graded = [], set()
    for lesson, modes in sorted((res.get("by_lesson") or {}).items()):
        for mode, v in modes.items():
            if "alone_s" not in v or mode_spec(mode)[0] == "serial":  # one process at a time: nothing shared
                continue
            model = v["alone_s"] + v["process_s"] / max(1, v["jobs"])
            graded.add(mode)
            rows.append([lesson, mode, v["wall_s"], v["alone_s"], round(v["process_s"]), v["jobs"], round(model, 1),
                         f"{model / max(1e-9, v['wall_s']):.2f}"])
    if not rows:
        return []
    res["bounds"] = {}
    lines = ["", "What bounds each part: its wall against A + W / c, where A is the seconds its busiest GPU was held "
             "alone (timings and tunings, one after another), W the seconds its grading processes ran (workers and "
             "judges, waits included) and c the jobs at a time. Where a timing pauses the GPU's other processes "
             "instead of waiting for them to end (grading/classroom/pause.py), their CPU work goes on beside it, so the wall "
             "falls between max(A, W/c) and A + W/c:", "",
             *md_table(["lesson", "mode", "wall s", "A: alone s", "W: process s", "c: jobs", "A + W/c", "of wall"],
                       rows)]
    one, _ = one_gpu_queues(res)
    for mode in (m for m in res["modes"] if m in graded and (mode_spec(m)[1] or 0) > 1 and one in graded):
        same = sorted({ls for ls, v in res["by_lesson"].items() if "alone_s" in v.get(mode, {})
                       and "alone_s" in v.get(one, {})})
        if not same:
            continue
        a1, w1, c1 = (sum(res["by_lesson"][ls][one][k] for ls in same) for k in ("alone_s", "process_s", "jobs"))
        an, wn, cn = (sum(res["by_lesson"][ls][mode][k] for ls in same) for k in ("alone_s", "process_s", "jobs"))
        c1, cn = c1 / len(same), cn / len(same)
        n, target = mode_spec(mode)[1], 0.85 * mode_spec(mode)[1]
        growth = wn / max(1e-9, w1)  # the same work's process seconds with more jobs on the same cores
        # (A1 + W1/c1) / (A1/n + g W1/cn) >= target  <=>  W1 (target g / cn - 1 / c1) <= A1 (1 - target / n)
        per_w = target * growth / cn - 1 / c1
        most = a1 * (1 - target / n) / per_w if per_w > 0 else None
        entry = {"against": one, "lessons": same, "alone_s": [round(a1, 1), round(an, 1)],
                 "process_s": [round(w1), round(wn)], "jobs": [c1, cn], "process_growth": round(growth, 2),
                 "process_over_alone": round(w1 / max(1e-9, a1), 1),
                 "most_process_over_alone_for_target": None if most is None else round(most / a1, 1)}
        res["bounds"][mode] = entry
        reach = (f"for {target:.2g}x, W would have to be at most {entry['most_process_over_alone_for_target']} times "
                 f"A (it is {entry['process_over_alone']} times)") if most is not None else \
            f"the jobs it adds outgrow the work's growth: {target:.2g}x needs no cut of W"
        lines += ["", f"- `{mode}` against `{one}` ({len(same)} lessons): A {a1:.1f} -> {an:.1f} s, W {w1:.0f} -> "
                  f"{wn:.0f} s ({growth:.2f}x the same work's process seconds), jobs {c1:.0f} -> {cn:.0f}; {reach}."]
    return lines


def gpu_in_header(header) -> str | None:
    """The GPU a part's header names ("- GPU: **NAME** ..."), for parts from before modes recorded their machine."""
    line = next((h for h in header or [] if h.startswith("- GPU: **")), None)
    return line.split("**")[1] if line else None


def compare(res: dict) -> dict:
    """scores_identical (every problem graded in two modes of one GPU model scored the same), max_speed_ratio_diff,
    and per pair of modes ("a|b") how many scores and ratios both graded, how many scores differed and the largest
    ratio difference. Modes on different GPU models are not paired: a speed ratio, and so a score in its band,
    belongs to its GPU."""
    modes = list(res["scores"])
    differ, worst, pairs = [], 0.0, {}
    model = {m: (res["modes"].get(m) or {}).get("gpu_model") for m in modes}
    for i, a in enumerate(modes):
        for b in modes[i + 1:]:
            if model[a] and model[b] and model[a] != model[b]:
                continue
            both = set(res["scores"][a]) & set(res["scores"][b])
            pair = {"scores": len(both), "scores_differ": 0, "ratios": 0, "max_ratio_diff": 0.0}
            for k in both:
                if res["scores"][a][k] != res["scores"][b][k]:
                    differ.append(f"{k}: {a} {res['scores'][a][k]} vs {b} {res['scores'][b][k]}")
                    pair["scores_differ"] += 1
            for k in set(res["ratios"][a]) & set(res["ratios"][b]):
                ra, rb = res["ratios"][a][k], res["ratios"][b][k]
                if ra > 0:
                    pair["ratios"] += 1
                    pair["max_ratio_diff"] = round(max(pair["max_ratio_diff"], abs(rb - ra) / ra), 4)
            worst = max(worst, pair["max_ratio_diff"])
            pairs[f"{a}|{b}"] = pair
    return {"scores_identical": not differ, "score_differences": differ[:40], "max_speed_ratio_diff": round(worst, 4),
            "pairs": pairs}


def seconds_per_submission_over_both(res: dict, a: str, b: str) -> tuple[tuple[float, float], list[str]]:
    """Seconds per submission of modes ``a`` and ``b`` over the lessons both graded (each lesson's own part), and
    those lessons: a mode graded on fewer lessons is set against the same lessons, not against a class whose
    other lessons are lighter or heavier. The modes' whole runs where no lesson has a part of each."""
    by = res.get("by_lesson") or {}
    both = sorted(ls for ls, modes in by.items() if a in modes and b in modes)
    if not both:
        return (res["modes"][a]["per_student_s"], res["modes"][b]["per_student_s"]), list(res["lessons"])

    def per(m):
        rows = [by[ls][m] for ls in both]
        wall = sum(r.get("wall_s", r["per_student_s"] * r["submissions"]) for r in rows)
        return wall / max(1, sum(r["submissions"] for r in rows))
    return (per(a), per(b)), both


def one_gpu_queues(res: dict) -> tuple[str | None, list[str]]:
    """The local queue on one GPU that modes of more GPUs are set against (all the machine's cores first), and the
    other one-GPU queues: one GPU on a share of the cores, what a node of its own would bring."""
    ones = [m for m in res["modes"] if mode_spec(m) == ("queue", 1)]
    one = next((m for m in ones if not mode_cores(m)), ones[0] if ones else None)
    return one, [m for m in ones if m != one]


def more_gpus(res: dict) -> list[str]:
    """The report's section on the GPUs added: each mode of N > 1 GPUs against the queue on one GPU of the same
    machine (throughput, target 1.7x for two), with its scores and speed ratios against serial grading and that
    one-GPU queue (targets: identical, within 3%). Into ``res["more_gpus"]``."""
    from kernellab.report import md_table, met
    one, shares = one_gpu_queues(res)
    many = [m for m in res["modes"] if (mode_spec(m)[1] or 0) > 1]
    if one is None or not many:
        return []
    rows, res["more_gpus"] = [], {}

    def against(a, b):
        return res["pairs"].get(f"{a}|{b}") or res["pairs"].get(f"{b}|{a}")

    def compared(mode, base_one):
        n = mode_spec(mode)[1]
        (one_s, mode_s), lessons = seconds_per_submission_over_both(res, base_one, mode)
        gain = one_s / max(1e-9, mode_s)
        target = round(0.85 * n, 2)  # 85 % of linear: the issue's 1.7x for two GPUs
        entry = {"gpus": n, "throughput_vs_one_gpu": round(gain, 2), "target": target, "lessons": lessons}
        short = ", ".join(ls[:2] for ls in lessons) if lessons != res["lessons"] else "all"
        cells = [mode, n, base_one, short, round(mode_s, 1), round(one_s, 1), f"{gain:.2f}x", f"{target}x",
                 met(gain, target)]
        base = serial_for(res, mode)
        for key, other in (("vs_serial", base), (f"vs_{base_one}", base_one)):
            p = against(mode, other) if other else None
            entry[key] = p
            cells += ["-", "-"] if not p else [
                f"{p['scores'] - p['scores_differ']}/{p['scores']}" + (" **differ**" if p["scores_differ"] else ""),
                f"{p['max_ratio_diff']:.1%} of {p['ratios']} ({met(0.03, p['max_ratio_diff'])})" if p["ratios"] else "-"]
        rows.append(cells)
        return entry
    for mode in many:
        res["more_gpus"][mode] = compared(mode, one)
        for share in shares:  # each GPU with its share of the cores, as on nodes of one GPU each
            res["more_gpus"][mode].setdefault("with_its_cores", {})[share] = {
                "cores": mode_cores(share), **compared(mode, share)}
    bases = sorted({b for m in many if (b := serial_for(res, m))})
    share_words = "".join(f"; `{s}` is the queue on one GPU given {mode_cores(s)} of the machine's cores (taskset), "
                          "as each GPU's share of a node of one GPU would be" for s in shares)
    return ["", f"GPUs added: each mode against the local queue on one GPU of the same machine (`{one}`{share_words}) "
            "over the lessons both graded; scores and speed ratios against serial grading "
            f"({', '.join(f'`{b}`' for b in bases) or 'none'}) and against that one-GPU queue (problems both graded):",
            "", *md_table(["mode", "GPUs", "against", "lessons", "s per submission", "one GPU's", "throughput vs one GPU",
                           "target", "met", "scores same as serial", "ratio diff vs serial (3%)",
                           "scores same as one GPU", "ratio diff vs one GPU (3%)"], rows)]


def under_load(res: dict) -> list[str]:
    """The report's section on speed under load: each speed problem of the solution regraded with nothing else
    running (quiet) beside the solution's copies graded within the class, per mode (into ``res["under_load"]``)."""
    from kernellab.report import md_table
    quiet = res.get("quiet")
    if not quiet:
        return []
    lesson, rows, table = quiet["lesson"], [], {}
    modes = res.get("modes", {})
    quiet_gpu = next((modes[m].get("gpu_model") for m in quiet.get("modes", []) if m in modes), None)
    for pid, values in quiet["values"].items():
        table[pid] = {"quiet": speed_spread(values)}
        for mode, ratios in res["ratios"].items():
            if quiet_gpu and res.get("modes", {}).get(mode, {}).get("gpu_model") not in (None, quiet_gpu):
                continue  # another GPU model's speeds: not set against these quiet ones
            mine = [v for k, v in ratios.items() if k.startswith(f"{lesson}/") and k.endswith(f"/{pid}")
                    and k.split("/")[1].split("-")[0] in ("solution", "load")]
            if mine:  # a mode that did not grade this lesson has no row
                table[pid][mode] = speed_spread(mine)
        for mode, st in table[pid].items():
            rows.append([pid, mode, st["n"], *(st.get(k, "-") for k in ("min", "median", "max")),
                         f"{st['spread']:.1%}" if st.get("spread") is not None else "-"])
    res["under_load"] = table
    return ["", f"Speed under load ({lesson}): the solution's speed problems regraded with nothing else running "
            "(quiet), beside its copies graded within the class while the rest of the class was graded:", "",
            *md_table(["problem", "graded", "n", "ratio min", "median", "max", "spread"], rows)]


def plot_by_lesson(res: dict, path: pathlib.Path) -> bool:
    """Seconds per submission for each lesson, one bar per mode (serial off the scale is drawn to the top and
    labelled); False where no part was graded one lesson at a time."""
    by = res.get("by_lesson") or {}
    modes = [m for m in res["modes"] if any(m in v for v in by.values())]
    if not by or not modes:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lessons = sorted(by)
    fast = [v[m]["per_student_s"] for v in by.values() for m in modes if m in v and mode_spec(m)[0] != "serial"]
    top = 1.6 * max(fast) if fast else None  # serial's bars would flatten the rest: clipped, with their value
    fig, ax = plt.subplots(figsize=(9, 4.4))
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        xs = [j + (i - (len(modes) - 1) / 2) * width for j, ls in enumerate(lessons) if mode in by[ls]]
        ys = [by[ls][mode]["per_student_s"] for ls in lessons if mode in by[ls]]
        bars = ax.bar(xs, [min(y, top) if top else y for y in ys], width, label=mode)
        for bar, y in zip(bars, ys):
            if top and y > top:
                ax.text(bar.get_x() + bar.get_width() / 2, top, f"{y:.0f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(lessons)), lessons, fontsize=8)
    if top:
        ax.set_ylim(0, top * 1.08)
    ax.set_ylabel("seconds per submission")
    ax.set_title("Grading a class, per lesson (lower is better)")
    ax.legend(fontsize=7, ncol=len(modes), loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(res: dict, out: pathlib.Path, notes: list[str] = ()) -> str:
    from kernellab.report import _header, md_table
    res.update(compare(res))
    serial = res["modes"].get("serial", {}).get("per_student_s")  # the one-GPU machine's, for the closing line
    lines = ["# Grading a class: serial, the local queue, Ray", ""] + (res.get("header") or _header()) + ["",
             f"A synthetic class over {', '.join(res['lessons'])}: {res['per_lesson']} submissions per lesson "
             "(copies of the solution, honest variants, known-wrong submissions, cheats from the corpus, the blank "
             "release), every problem of each graded (`autograder/benchmarks/class_grading.py`)"
             + "".join(f"; {n} more copies of {ls}'s solution (speed under load)"
                       for ls, n in (res.get("load_copies") or {}).items()) + ".", ""]
    rows = []
    for mode, m in res["modes"].items():
        base = serial_for(res, mode)  # serial grading of the mode's own machine
        base_s = res["modes"][base]["per_student_s"] if base and mode_spec(mode)[0] != "serial" else None
        share = f"{m['per_student_s'] / base_s:.0%}" if base_s else ""
        busy = m["gpu_util_mean"] if m["gpu_util_mean"] is not None else "-"
        if len(m.get("gpu_util_per_gpu") or {}) > 1:  # each GPU's own, after the mean
            busy = f"{busy} ({' / '.join(str(u) for u in m['gpu_util_per_gpu'].values())})"
        rows.append([mode, m.get("gpu_model") or "-", m["students"], m["problems"], m["wall_s"], m["per_student_s"],
                     share, busy, m["gpus"], (m.get("machine") or {}).get("cores", "-"), m["jobs"]])
    lines += md_table(["mode", "GPU", "submissions", "problems", "wall s", "s per submission",
                       "of serial (its machine's)", "GPU busy %", "GPUs", "cores", "jobs"], rows)
    lines += ["", "- Scores identical across modes (every problem graded in two modes on one GPU model): "
              f"**{res['scores_identical']}**",
              f"- Largest relative difference of a speed ratio between modes (one GPU model): "
              f"**{res['max_speed_ratio_diff']:.1%}**"]
    lines += [f"  - {d}" for d in res["score_differences"][:20]]
    out.mkdir(parents=True, exist_ok=True)
    if plot_by_lesson(res, out / "class_grading.png"):
        lines += ["", "![seconds per submission by lesson and mode](class_grading.png)"]
    if res.get("by_lesson"):
        lines += ["", "Per lesson (parts graded one lesson at a time):", ""]
        lines += md_table(["lesson", "mode", "submissions", "s per submission", "GPU busy %"], [
            [lesson, mode, v["submissions"], v["per_student_s"], v["gpu_util_mean"]]
            for lesson, modes in sorted(res["by_lesson"].items()) for mode, v in modes.items()])
    lines += more_gpus(res)
    lines += bounds(res)
    lines += under_load(res)
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    res["notes"] = list(notes)
    if serial and "queue" in res["modes"]:
        per_hour = 3600 / max(1e-9, res["modes"]["queue"]["per_student_s"])
        on = res["modes"]["queue"].get("gpu_model") or "this GPU"
        lines += [f"- Submissions per hour on one {on} with the queue: **{per_hour:.0f}** (serial: {3600 / serial:.0f})"]
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "class_grading.md").write_text(text)
    slim = {k: v for k, v in res.items() if k not in ("scores", "ratios")}
    slim["speed_ratios"] = res["ratios"]
    (out / "class_grading.json").write_text(json.dumps(slim, indent=1))
    return text


SCALEOUT_PAIRS = {"queue": ("queue_1gpu_16cores", "queue_2gpu"), "ray": ("ray_1nodes", "ray_2nodes")}


def scaleout(parts: list) -> dict:
    """Issue 59's comparison from parts graded on one two-GPU machine: each backend on one GPU with its share of the
    cores (16 of 32: ``queue_1gpu_16cores``, ``ray_1nodes`` under taskset) against both GPUs with all the cores
    (``queue_2gpu``; ``ray_2nodes``: two raylets, each one GPU and 16 cores, as two nodes of a cloud). Speedup:
    submissions an hour of the two-GPU run over the one-GPU run's. Scores: every problem graded in every mode,
    compared across them (no serial grading ran beside these)."""
    res = merge(parts)
    modes = res["modes"]
    out = {"lessons": res["lessons"], "modes": {}, "gpu": None}
    for m, v in modes.items():
        out["modes"][m] = {k: v.get(k) for k in ("wall_s", "students", "problems", "per_student_s", "gpus", "jobs",
                                                  "gpu_util_mean")}
        out["modes"][m]["cores"] = (v.get("machine") or {}).get("cores")
        out["modes"][m]["submissions_per_hour"] = round(3600 * v["students"] / v["wall_s"], 1)
        out["gpu"] = out["gpu"] or (v.get("machine") or {}).get("gpu")
    for backend, (one, two) in SCALEOUT_PAIRS.items():
        if one in modes and two in modes:
            out[f"speedup_{backend}"] = round(out["modes"][two]["submissions_per_hour"]
                                              / out["modes"][one]["submissions_per_hour"], 2)
    keys = set.intersection(*(set(v) for v in res["scores"].values()))
    differ = sorted(k for k in keys if len({res["scores"][m][k] for m in res["scores"]}) > 1)
    out["scores_compared"], out["scores_differ"] = len(keys), {k: {m: res["scores"][m][k] for m in res["scores"]}
                                                                for k in differ}
    out["scores_identical"] = not differ
    out["messages"] = {m: said for m, said in (res.get("messages") or {}).items() if said}
    out["holds_beside_timing"] = {m: v.get("holds_beside_timing") for m, v in modes.items()}
    return out


def write_scaleout(res: dict, out: pathlib.Path, header: list, notes: list = ()) -> pathlib.Path:
    from kernellab.report import md_table
    out.mkdir(parents=True, exist_ok=True)
    (out / "class_scaleout.json").write_text(json.dumps(res, indent=1) + "\n")
    lines = ["# Grading scale-out: one GPU with its cores against two (issue 59)", "", *header, "",
             *md_table(["mode", "GPUs", "cores", "jobs", "submissions", "problems", "wall s", "s per submission",
                       "submissions / hour", "GPU busy %"],
                      [[m, v["gpus"], v["cores"], v["jobs"], v["students"], v["problems"], v["wall_s"],
                        v["per_student_s"], v["submissions_per_hour"], v["gpu_util_mean"]]
                       for m, v in res["modes"].items()]),
             "", f"- speedup, queue (two GPUs, 32 cores over one GPU, 16 cores): **{res.get('speedup_queue', '-')}x**",
             f"- speedup, Ray (two nodes over one, each node one GPU and 16 cores): **{res.get('speedup_ray', '-')}x**",
             f"- scores identical across the modes: **{res['scores_identical']}** ({res['scores_compared']} problems "
             "graded in every mode)"]
    for k, by_mode in res["scores_differ"].items():
        lines.append(f"  - {k}: " + ", ".join(f"{m} {v}" for m, v in by_mode.items()))
    (out / "class_scaleout.md").write_text("\n".join(lines + list(notes)) + "\n")
    return out / "class_scaleout.md"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="serial,queue,ray_local")
    ap.add_argument("--lessons", default=",".join(LESSONS))
    ap.add_argument("--per-lesson", type=int, default=10)
    ap.add_argument("--serial-per-lesson", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--load-copies", type=int, default=0, help="more copies of the first lesson's solution, graded "
                                                                "with the class (speed under load)")
    ap.add_argument("--quiet-regrades", type=int, default=0, help="regrade the first lesson's speed problems this "
                                                                  "many times alone first")
    ap.add_argument("--part", default=None, help="write part_<NAME>.json (to --out) instead of the report")
    ap.add_argument("--merge", nargs="*", default=None, help="part files to merge into the report")
    ap.add_argument("--out", default=os.environ.get("OUT", "assets/gpu"))
    ap.add_argument("--header-file", default=None, help="merge: the report's header lines, in place of the first "
                                                          "part's (parts from several runs: say each run's date)")
    ap.add_argument("--note", action="append", default=[], help="merge: a note line for the report")
    ap.add_argument("--scaleout", nargs="*", default=None, help="parts of issue 59's modes (queue_1gpu_16cores, "
                                                                  "queue_2gpu, ray_1nodes, ray_2nodes): write "
                                                                  "--out/class_scaleout.json and .md")
    ap.add_argument("--timeline", default=None, help="a mode's records (logs-MODE, from the device's records.tgz): "
                                                      "draw its GPU holds over time into --out/timeline_MODE.png")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    if a.timeline:
        logs = pathlib.Path(a.timeline)
        path = out / f"timeline_{logs.name.removeprefix('logs-')}.png"
        out.mkdir(parents=True, exist_ok=True)
        if not plot_timeline(logs, path):
            raise SystemExit(f"no grading records with GPU holds under {logs}")
        print(path, json.dumps(gpu_timeline(logs)))
        return 0
    if a.scaleout:
        res = scaleout([json.loads(pathlib.Path(p).read_text()) for p in a.scaleout])
        header = pathlib.Path(a.header_file).read_text().splitlines() if a.header_file else []
        print(write_scaleout(res, out, header, a.note))
        return 0
    if a.merge:
        res = merge([json.loads(pathlib.Path(p).read_text()) for p in a.merge])
        if a.header_file:
            res["header"] = pathlib.Path(a.header_file).read_text().splitlines()
        print(write(res, out, a.note))
        return 0
    def save(res):
        out.mkdir(parents=True, exist_ok=True)
        (out / f"part_{a.part}.json").write_text(json.dumps(res))
        print(json.dumps({m: v for m, v in res["modes"].items()}, indent=1), flush=True)
    res = run([m for m in a.modes.split(",") if m], a.lessons.split(","), a.per_lesson, a.serial_per_lesson,
              a.jobs, save if a.part else None, a.load_copies, a.quiet_regrades)
    if a.part:
        return 0
    print(write(res, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
