"""Parent side of the grade of record (trusted: it never imports or runs learner code).

For each graded problem: build inputs from the secret seed, start a fresh child process on
the learner's cells with a hard time limit, read back plain data, judge it against
references computed here, and leave an audit record (result.json).
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import torch

from kernellab.device import DEVICE
from kernellab.lessons import problems_of
from kernellab.notebook_source import sources_for
from kernellab.paths import pythonpath_with_package
from kernellab.problems.base import (CallResult, Outcome, judge_answers, judge_correctness, judge_function,
                             seeded_generator)
from kernellab.grading.judge import worker_files
from kernellab.grading.processes import zygote
from kernellab.grading.classroom.cores import pin
from kernellab.grading.judge.secret import problem_seed

# Seconds. Compilation/autotuning and the graded run have separate budgets (GRADING.md, 9).
COMPILE_BUDGET = float(os.environ.get("KERNELLAB_COMPILE_BUDGET", 120))
RUN_BUDGET = float(os.environ.get("KERNELLAB_RUN_BUDGET", 180))
LOAD_BUDGET = float(os.environ.get("KERNELLAB_LOAD_BUDGET", 60))

# Set by interrupt() (a class queue's Ctrl-C): every child being watched is killed and its grading raises
# KeyboardInterrupt in its own thread, so a pool of jobs stops at once; resume() clears it.
_STOP = threading.Event()
# Set to 1, a grading with a result store refuses to grade anything the store does not hold (nbgrader after a
# queue run must only read the store).
STORE_ONLY_ENV = "KERNELLAB_STORE_ONLY"

# The class queue's GPU slots (grading/classroom/slots.py): None when one notebook is graded (one process at a time).
_SLOTS = None


@contextlib.contextmanager
def use_slots(slots):
    """Grade under ``slots`` (a GpuSlots) for the block: each child process holds its job's GPU, timed ones alone."""
    global _SLOTS
    _SLOTS = slots
    try:
        yield slots
    finally:
        _SLOTS = None


_DROP_ENV = ("NBGRADER_", "KERNELLAB_SECRET", "JPY_", "JUPYTER_", "IPYKERNEL")


def _child_env(interpreted: bool = False) -> dict:
    """The child's environment carries no grading marker (no NBGRADER_EXECUTION, no secret).
    ``interpreted``: run Triton in its CPU interpreter even on a GPU machine (to count reads)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_ENV)}
    if interpreted:
        env["KERNELLAB_FORCE_CPU"] = "1"
    env["PYTHONPATH"] = pythonpath_with_package(env.get("PYTHONPATH"))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    # Inductor (the compiled step of lesson 07, compiled by the grader) compiles in this process, on no pool of
    # threads: the worker refuses threads once learner code is loaded.
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    return env


# A job's record has each of its grading processes' facts (holds, pauses, phases, cores, ...) under the key prefix
# of that process: the worker's unprefixed, the judge's and a baseline judge's prefixed (_run_judge, the baseline
# timing). With what each ran.
PROCESSES = (("", "worker"), ("judge_", "judge"), ("baseline_", "baseline"))


def each_process(record: dict, key: str) -> list:
    """``key``'s value for each grading process of a job's ``record`` (None where a process did not run)."""
    return [record.get(f"{pre}{key}") for pre, _ in PROCESSES]


_TRITON: dict = {}  # owner ("judge", or a submission's notebook hash) -> its Triton cache folder
_TRITON_LOCK = threading.Lock()  # the class queue grades from several threads


def triton_cache(owner: str | None) -> str:
    """Triton's cache folder for ``owner``'s processes: "judge" (every judge that replays on a GPU: never handed to a
    worker, so a worker cannot plant a binary or a launcher there for a judge to load), "interpreting-judge" (judges
    that run kernel bodies in Triton's interpreter: kept apart from the GPU judges' for the same reason), or one
    submission's notebook hash (the workers of that submission: its problems reuse what its first worker compiled,
    and no worker loads a binary or a launcher that another submission's worker wrote; with Triton's one default
    cache for every worker, a submission could overwrite another student's compiled kernels). None: a folder of
    its own. Each is a folder of its own in the temporary folder, randomly named (not beside the others, where a worker told of its own
    would find them), removed with this process (``drop_triton_caches``); worker and judge still run as one user
    (docs/GRADE_OF_RECORD.md)."""
    with _TRITON_LOCK:
        key = owner if owner is not None else object()
        if key not in _TRITON:
            _TRITON[key] = tempfile.mkdtemp(prefix="kl-triton-")
        return _TRITON[key]


def inductor_cache(triton_folder: str) -> str:
    """Inductor's cache for the processes of a Triton cache folder (``triton_cache``), inside it: the same owners,
    removed with it. Inductor's default is one folder per user that every process shares, and it imports the
    generated code it finds there by content hash without reading it again: a worker that wrote the file a
    baseline judge's torch.compile would generate (lesson 07) would run its own code in that judge."""
    return os.path.join(triton_folder, "inductor")


def drop_triton_caches() -> None:
    """Remove every Triton cache folder of this process now (at exit; a Ray grader before it is killed, which runs
    no atexit). Later gradings get new ones."""
    with _TRITON_LOCK:
        for path in _TRITON.values():
            shutil.rmtree(path, ignore_errors=True)
        _TRITON.clear()


atexit.register(drop_triton_caches)  # this process's caches are its own: gone with it


def _run_child(jobdir: pathlib.Path, interpreted: bool = False,
               limit_s: float | None = None, module: str = "kernellab.grading.worker.child",
               result: str = "result.pt", handoff: bool = False,
               owner: str | None = None) -> tuple[str | None, dict]:
    """Run the child (the worker, or with ``module`` the judge) with phase budgets (``limit_s`` caps the
    compile and run budgets). Under a class queue (grading/classroom/slots.py) it starts beside other work; with
    ``handoff`` it asks for its GPU alone when it needs it (its "alone" phase,
    slots.ask_for_gpu_alone): a judge about to time, a speed problem's worker about to autotune. ``owner``: the
    submission a worker runs for (its Triton cache: triton_cache). Returns (problem text or None, timing info)."""
    slots = _SLOTS
    if slots is None:
        return _start_child(jobdir, interpreted, limit_s, module, result, {}, owner=owner)
    # CPU cores too (grading/classroom/cores.py): a timed process on its GPU's own cores, the rest off them. None where no
    # cores are kept (too few to spare): every process then runs anywhere, as without a queue.
    timed = slots.cores(True)
    cores = {"start": slots.cores(False), "timed": timed} if timed else None
    with slots.process(False, _STOP) as held:
        why, info = _start_child(jobdir, interpreted, limit_s, module, result,
                                 {**(slots.env() if DEVICE.on_gpu and not interpreted else {}), **slots.thread_env()},
                                 held.go_alone if handoff else None, cores, held.go_shared if handoff else None,
                                 owner, held)
    info.update({"gpu_slot": slots.gpu(), "slot_wait_s": round(held.waited, 2),
                 "paused_s": round(held.paused_s(), 2),  # for others' timings (grading/classroom/pause.py)
                 "paused": held.pause_spans(),
                 "alone": any(span[2] for span in held.spans),  # from its start, or once it asked
                 "holds": [[round(a, 3), round(b, 3), al] for a, b, al in held.spans]})
    return why, info


def _start_child(jobdir, interpreted, limit_s, module, result, extra_env: dict,
                 go_alone=None, cores: dict | None = None, go_shared=None,
                 owner: str | None = None, held=None) -> tuple[str | None, dict]:
    """``held``: the process's hold of its GPU under a class queue (slots._Holder), told the process's pid once it
    has started, so that others' timings pause it (grading/classroom/pause.py); its paused seconds count in no budget."""
    budgets = {"start": LOAD_BUDGET, "import": LOAD_BUDGET, "load": LOAD_BUDGET,
               "compile": COMPILE_BUDGET, "run": RUN_BUDGET, "alone": 30.0, "done": 30.0}
    if limit_s is not None:
        budgets["compile"], budgets["run"] = min(COMPILE_BUDGET, limit_s), min(RUN_BUDGET, limit_s)
    t0 = time.monotonic()
    (jobdir / "phase").write_text("start")
    with open(jobdir / f"{module.rsplit('.', 1)[-1]}.log", "wb") as log:
        # Its own session, so a budget can kill the child's whole group; our pid, so it dies with us.
        env = {**_child_env(interpreted), **extra_env}
        # A judge that interprets kernels runs their bodies (confined, but with its Triton cache writable): never the
        # cache whose launchers a GPU judge loads.
        on_cpu = interpreted or not DEVICE.on_gpu
        caches = triton_cache(("interpreting-judge" if on_cpu else "judge") if module.endswith(".judge") else owner)
        env["TRITON_CACHE_DIR"] = caches
        env["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache(caches)
        # A fork of a warm process that already imported torch and Triton (grading/processes/zygote.py), else a fresh one.
        proc = zygote.spawn(module, [jobdir], env, jobdir, log.name, on_cpu)
        if proc is None:
            proc = subprocess.Popen([sys.executable, "-m", module, str(jobdir), str(os.getpid())],
                                    cwd=jobdir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)
        if held is not None:
            held.started(proc.pid)
        pinned = {}  # phase -> the cores the child was moved to then (its record says which)

        def move(phase: str) -> None:
            if cores and pin(proc.pid, cores[phase]):
                pinned[phase] = sorted(cores[phase])
        move("start")
        gpu_alone = go_alone

        def go_alone_on_its_cores():  # its GPU alone, then its cores: both before it is told to go
            gpu_alone()
            move("timed")

        def go_shared_off_its_cores():  # back among the untimed processes, on their cores
            go_shared()
            move("start")
        phases = []  # [phase, wall-clock time it began]: where a process's time (and its GPU alone) went
        try:
            why, phase = _watch(proc, jobdir, budgets, go_alone_on_its_cores if go_alone is not None else None,
                                phases, go_shared_off_its_cores if go_shared is not None else None,
                                held.paused_s if held is not None else None)
        finally:  # interrupted here (Ctrl-C): the child goes too
            if proc.poll() is None:
                zygote.kill_group(proc)
    info = {"exit_code": proc.returncode, "last_phase": phase, "wall_s": time.monotonic() - t0,
            "cores": pinned, "phases": phases + [["end", round(time.time(), 3)]]}
    # Only a clean exit after the trusted code wrote its result counts: a result file left by a process
    # that then died (or was made to exit) is not read.
    if why is None and (proc.returncode != 0 or not (jobdir / result).exists()):
        code = proc.returncode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        doing = {"compile": "compiling", "run": "running"}.get(_budget_key(phase), "loading")
        why = (f"The process running your code died ({how}) while {doing} "
               "it: os._exit, a crash inside a kernel or a fatal CUDA error (such as an illegal memory "
               "access from an unmasked load or store). Only this problem is affected.")
    return why, info


def _budget_key(phase: str) -> str:
    """The budget (and the words) a phase falls under: a graded run's steps (run-call, run-keep) are the run's,
    the compiling ahead of the first call (compile-ahead) the compile's."""
    return "run" if phase.startswith("run") else "compile" if phase.startswith("compile") else phase


def _watch(proc, jobdir: pathlib.Path, budgets: dict, go_alone, seen: list,
           go_shared=None, paused_s=None) -> tuple[str | None, str]:
    """Wait for the child, following the phase it reports; kill it when a phase overruns its budget. A judge
    about to time reports "alone": ``go_alone()`` gets it its GPU alone (waiting as long as that takes, which
    no budget counts), then it is told to go. A worker done with its GPU alone reports "shared":
    ``go_shared()`` makes its hold a shared one again, then it is told to go on ("go-shared"). ``seen`` gets
    [phase, wall-clock time] as each phase is seen (the hand-offs' answers as phases "alone-go" and
    "shared-go"). ``paused_s()``: seconds the child has been paused for others' timings, which no budget counts."""
    paused_s = paused_s or (lambda: 0.0)
    phase, since = "start", time.monotonic()
    paused_then = paused_s()
    seen.append([phase, round(time.time(), 3)])
    while proc.poll() is None:
        time.sleep(0.05)
        if _STOP.is_set():
            zygote.kill_group(proc)
            raise KeyboardInterrupt("grading interrupted")
        try:
            now_phase = worker_files.read_text(jobdir / "phase", 256).strip() or phase
        except OSError:
            now_phase = phase
        if now_phase != phase:
            phase, since, paused_then = now_phase, time.monotonic(), paused_s()
            seen.append([phase, round(time.time(), 3)])
            # A hand-off (slots.ask_for_gpu_alone / ask_to_share): do it, answer, and the budget starts after.
            answer, mark, do = {"alone": ("go", "alone-go", go_alone),
                                "shared": ("go-shared", "shared-go", go_shared)}.get(phase, (None, None, None))
            if answer:
                if do is not None:
                    do()
                try:
                    worker_files.write_new(jobdir / answer, "go")
                except OSError:  # something of the child's under the answer's name
                    zygote.kill_group(proc)
                    return "Stopped: your code wrote into the grader's own hand-off files.", phase
                since, paused_then = time.monotonic(), paused_s()
                seen.append([mark, round(time.time(), 3)])
        key = _budget_key(phase)
        limit = budgets.get(key, RUN_BUDGET)
        if time.monotonic() - since - (paused_s() - paused_then) > limit:
            what = {"compile": "compiling (and autotuning) your kernel",
                    "run": "the graded run"}.get(key, "loading your code")
            zygote.kill_group(proc)
            return (f"Stopped: {what} took longer than its budget of {limit:.0f} s. An endless "
                    "loop, or a kernel far too slow for this size?"), phase
    return None, phase


def interrupt() -> None:
    """Stop every grading in progress in this process (their children are killed) and refuse new ones."""
    _STOP.set()
    zygote.stop_all()


def resume() -> None:
    _STOP.clear()



def _versions() -> dict:
    import triton
    info = {"torch": torch.__version__, "triton": triton.__version__, "python": sys.version.split()[0],
            "device": DEVICE.as_dict()}
    if DEVICE.on_gpu:
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
            info["clocks"] = q.stdout.strip()
        except Exception:  # noqa: BLE001
            pass
    return info


# This process reads and parses a problem's candidate cells for every problem before any child's budget counts: a
# red-team notebook with one 1 MB cell of `x = 1` lines cost 87 s of it over lesson 01's six problems.
MAX_CELL_CHARS, MAX_CODE_CHARS = 200_000, 1_000_000


def oversized_code(nb) -> str | None:
    """Why a notebook's code is too long to grade (a cell over MAX_CELL_CHARS, or all code over MAX_CODE_CHARS)."""
    total = 0
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        n = len(src) if isinstance(src, str) else sum(len(str(part)) for part in src)
        total += n
        if n > MAX_CELL_CHARS:
            return (f"A code cell of your notebook holds {n} characters, more than the {MAX_CELL_CHARS} a graded cell "
                    "may: nothing was graded.")
    if total > MAX_CODE_CHARS:
        return f"Your notebook's code holds {total} characters, more than {MAX_CODE_CHARS}: nothing was graded."
    return None


def grade_problem(problem, nb, seed: int, ceil=None, facts: dict | None = None,
                  lesson: str = "", limit_s: float | None = None) -> tuple[Outcome, dict]:
    """Grade one problem of a submitted notebook in a fresh child process (``limit_s``: a shorter compile
    and run budget, for a submission known to loop)."""
    if _STOP.is_set():
        raise KeyboardInterrupt("grading interrupted")
    record = {"problem": problem.id, "kind": problem.kind, "seed": seed, "started": _now()}
    why = oversized_code(nb)
    if why:
        return Outcome(problem.id, 0.0, why), record
    sources, missing = sources_for(nb, problem.names)
    if missing:
        return Outcome(problem.id, 0.0, missing), record
    why = problem.not_gradable_here()
    if why:
        return Outcome(problem.id, 0.0, why), record
    from kernellab.grading.judge.store import notebook_hash
    owner = notebook_hash(nb)  # the submission whose workers share a Triton cache (triton_cache)
    if replayable(problem):
        return _grade_by_replay(problem, sources, seed, ceil, lesson, limit_s, record, owner)
    with tempfile.TemporaryDirectory(prefix="kl-grade-") as tmp:
        jobdir = pathlib.Path(tmp) / "worker"  # its learner code's scratch folder goes beside it (child.py)
        jobdir.mkdir()
        job = {"lesson": lesson, "problem": problem.id, "sources": sources, "seed": 0}
        cases = None
        interpreted = getattr(problem, "interpreted", False)
        if problem.kind == "correctness":
            cases = problem.make_cases(seeded_generator(seed), DEVICE.on_gpu and not interpreted)
            torch.save(cases, jobdir / "cases.pt")
            record["shapes"] = [c.label for c in cases]
        elif problem.kind == "function":
            cases = problem.make_cases(seeded_generator(seed))
            job["calls"] = cases
        elif problem.kind == "speed":  # replayable() holds every speed problem: none is timed in a worker
            return Outcome(problem.id, 0.0, "Grading this problem failed: its speed is not replayed."), record
        (jobdir / "job.json").write_text(json.dumps(job))
        data, why = _run_worker(jobdir, interpreted, limit_s, record, owner=owner)
        if why:
            return Outcome(problem.id, 0.0, why), record
    if data.get("error"):
        return Outcome(problem.id, 0.0, data["error"]), record
    if problem.kind == "correctness":
        return _judge_correctness(problem, cases, [call_result(r) for r in data.get("results", [])]), record
    if problem.kind == "function":
        return judge_function(problem, cases, data.get("results", [])), record
    if problem.kind == "answers":
        return judge_answers(problem, data.get("values", {}), facts or {}), record
    return Outcome(problem.id, 0.0, f"unknown problem kind {problem.kind}"), record


def call_result(row: dict, judged: bool = False) -> CallResult:
    """A CallResult from a child's plain-data row (the record it carried stays behind: it was replayed); a judge's
    messages (``judged``) as the learner may read them (``judge_said``)."""
    fields = {f.name for f in dataclasses.fields(CallResult)} - {"record"}
    out = {k: v for k, v in row.items() if k in fields}
    if judged:
        out.update({k: judge_said(out[k]) for k in ("error", "overrun") if out.get(k)})
    return CallResult(**out)


JUDGE_SAID_MAX = 400


def judge_said(text) -> str:
    """A judge's message as the learner reads it: printable characters on one line, at most JUDGE_SAID_MAX of them.
    What a judge says comes from Triton, CUDA and the course's own checks, never from learner Python; bounded all
    the same, so that no judge's exception text is a channel out of it."""
    said = " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())
    return said if len(said) <= JUDGE_SAID_MAX else said[:JUDGE_SAID_MAX - 3] + "..."


def replayable(problem) -> bool:
    """Problems the judge grades by replaying the worker's recorded calls: every kernel problem, and those whose
    call hook is recorded as one call (``replay_call``: lesson 05's Function, forward and backward through
    autograd; lesson 06's block and LayerNorm Function, whose PyTorch ops the judge checks against their rule and
    does itself). The others stay in the worker (lesson 07's compiled block: docs/GRADE_OF_RECORD.md)."""
    if problem.kind not in ("correctness", "speed") or os.environ.get("KERNELLAB_REPLAY", "1") == "0":
        return False
    if getattr(problem, "call", None) is None:
        return getattr(problem, "own_outputs", True)
    return problem.replay_call


def _run_worker(jobdir: pathlib.Path, interpreted: bool, limit_s, record: dict, **kw) -> tuple[dict | None, str | None]:
    """Run a worker (``_run_child``) and read its result: (data, None), or (None, why there is none). Its exit code,
    last phase, wall time and log's tail go into ``record``."""
    why, info = _run_child(jobdir, interpreted, limit_s, **kw)
    record.update(info)
    record["child_log_tail"] = worker_files.tail(jobdir / "child.log")
    if why:
        return None, why
    return _worker_result(jobdir, record)


def _worker_result(folder: pathlib.Path, record: dict) -> tuple[dict | None, str | None]:
    """(a worker's result data, None), or (None, why it cannot be read): plain data only, no pickled code, read
    as worker_files reads anything of a worker's; how the worker was confined goes into ``record``."""
    try:
        data = worker_files.load_torch(folder / "result.pt")
    except OSError as exc:
        return None, f"The worker's result could not be read ({exc}): did your code change its folder?"
    record["sandbox"] = str(data.get("sandbox"))[:120]  # grading/processes/sandbox.py
    return data, None


def decoy_case(case, gen: torch.Generator):
    """The worker's copy of a case: the same shapes, strides, dtypes and numbers (n, eps, flags), fresh random
    values. The worker never holds the secret inputs, and a result computed on the host for its inputs is
    wrong for the judge's."""
    def fresh(t):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return t
        out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
        out.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float32))
        return out
    return dataclasses.replace(case, inputs=[fresh(t) for t in case.inputs])


def _grade_by_replay(problem, sources, seed: int, ceil, lesson: str, limit_s, record: dict, owner: str):
    """Worker records, judge replays: the worker runs the learner's cells on inputs of its own and records
    each graded call; the judge (another process, no learner Python) replays the records on the secret
    inputs, or times the replay against the baseline; this process judges what came back."""
    interpreted = getattr(problem, "interpreted", False)
    on_gpu = DEVICE.on_gpu and not interpreted
    with tempfile.TemporaryDirectory(prefix="kl-grade-") as tmp:
        work, judge = pathlib.Path(tmp) / "worker", pathlib.Path(tmp) / "judge"
        cases = None
        job = {"lesson": lesson, "problem": problem.id, "sources": sources, "seed": 0, "record": True}
        if problem.kind == "correctness":
            cases = problem.make_cases(seeded_generator(seed), on_gpu)
            record["shapes"] = [c.label for c in cases]
        else:
            # The worker's inputs come from a seed unrelated to the secret; so do the judge's timed inputs.
            job["seed"] = int.from_bytes(os.urandom(5), "little")
        for ahead in (True, False):
            work.mkdir()
            if cases is not None:
                gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(6), "little"))
                torch.save([decoy_case(c, gen) for c in cases], work / "cases.pt")
            (work / "job.json").write_text(json.dumps({**job, "compile_ahead": ahead}))
            # A speed problem's worker autotunes with its GPU alone (child._tune_alone), compiling and recording
            # beside other work.
            data, why = _run_worker(work, interpreted, limit_s, record, handoff=problem.kind == "speed", owner=owner)
            if why:
                return Outcome(problem.id, 0.0, why), record
            record["compile_ahead"] = data.get("ahead")
            if not (data.get("ahead") or {}).get("broke"):  # what compile_ahead.broke reads
                break
            # Its dry pass (grading/worker/compile_ahead.py) left the worker's GPU unusable: graded again without it, so that
            # the pass costs time, never points.
            record["compile_ahead_broke"] = data["ahead"]["broke"]
            shutil.rmtree(work)
        if data.get("error"):
            return Outcome(problem.id, 0.0, data["error"]), record
        if problem.kind == "correctness":
            rows = data.get("results", [])
            if not rows or (len(rows) == 1 and rows[0].get("label") == "signature"):
                return _judge_correctness(problem, cases, [call_result(r) for r in rows]), record
            records = [None if r.get("error") else r.get("record") for r in rows]
        else:
            records = data.get("records") or []
            if not records:
                return Outcome(problem.id, 0.0, "The call at the timed size left nothing to replay."), record
        # Made now, after the worker ended (and its confinement kept it out of the grading's folder): a folder a
        # worker made in its place fails here, costing only this problem.
        try:
            judge.mkdir()
        except FileExistsError:
            return Outcome(problem.id, 0.0, "Your code wrote into the grading's own folder; not graded."), record
        if (work / "kernels").is_dir():
            worker_files.copy_regular_files(work / "kernels", judge / "kernels")
        (judge / "records.json").write_text(json.dumps(records))
        judge_seed = seed ^ int.from_bytes(os.urandom(5), "little")
        (judge / "judge.json").write_text(json.dumps({"lesson": lesson, "problem": problem.id, "seed": judge_seed,
                                                      "interpreted": interpreted}))
        if cases is not None:
            torch.save(cases, judge / "cases.pt")
        judged = _run_judge(problem, judge, interpreted, limit_s, record)
    if isinstance(judged, Outcome):
        return judged, record
    if problem.kind == "speed":
        record["alloc_retries"] = judged["measurement"].get("alloc_retries", 0)
        record["gpu_state"] = judged["measurement"].get("gpu_state")  # the GPU's clocks and power around the timing
        return _judge_timing(problem, judged, judge_seed, ceil), record
    results = []
    for worker_row, replayed in zip(rows, judged.get("results", [])):
        # The worker can only lose points for itself: its errors stand; a clean claim is replaced by the replay.
        mine = worker_row.get("error") or replayed is None
        results.append(call_result(worker_row if mine else replayed, judged=not mine))
    return _judge_correctness(problem, cases, results), record


def _judge_correctness(problem, cases: list, results: list) -> Outcome:
    """The grade of record's verdict on a correctness problem: the learner checks', with the references computed
    on the GPU where there is one (``reference_on_gpu``)."""
    return judge_correctness(problem, cases, results, reference_on_gpu(problem))


def reference_on_gpu(problem, device: str = "cuda", on_gpu: bool | None = None):
    """``problem.reference`` computed on the job's GPU (``problem.reference`` itself without one): the inputs go
    there, the fp64 result comes back. On the CPU, lesson 04's fp64 attention references (17 GFLOP per case at
    N = 4096) kept its grading process busy: 65 s of CPU in a 75 s class run on one H200, against 15 s for lessons
    01 and 02, on the cores the workers needed (2026-11-26). The GPU computes the same fp64 values (in another
    order of summation, far below every tolerance). Under a class queue this is the job's untimed use of its GPU
    (GpuSlots.own_gpu_work), never beside a timing. A reference that cannot run there (out of memory, a tensor it
    makes on the CPU) is computed on the CPU, as before. ``device`` and ``on_gpu``: a test's."""
    if not (DEVICE.on_gpu if on_gpu is None else on_gpu) or getattr(problem, "interpreted", False) \
            or problem.reference is None:
        return problem.reference

    def ref(case):
        with _SLOTS.own_gpu_work(_STOP) if _SLOTS is not None else contextlib.nullcontext():
            try:
                moved = dataclasses.replace(case, inputs=[t.to(device) if isinstance(t, torch.Tensor) else t
                                                          for t in case.inputs])
                return _on_cpu(problem.reference(moved))
            except (RuntimeError, TypeError, ValueError):  # torch.OutOfMemoryError is a RuntimeError
                torch.cuda.empty_cache()
        return problem.reference(case)
    return ref


def _on_cpu(out):
    if isinstance(out, torch.Tensor):
        return out.cpu()
    if isinstance(out, (tuple, list)):
        return type(out)(_on_cpu(o) for o in out)
    return out


def _run_judge(problem, judge: pathlib.Path, interpreted: bool, limit_s, record: dict):
    """Run the judge on its folder: what it wrote (plain data), or the Outcome saying why it failed."""
    why, info = _run_child(judge, interpreted, limit_s, module="kernellab.grading.judge.judge", result="judged.pt",
                           handoff=problem.kind == "speed")
    record.update({f"judge_{k}": v for k, v in info.items()})
    record["judge_log_tail"] = worker_files.tail(judge / "judge.log")
    if why:
        return Outcome(problem.id, 0.0, why.replace("The process running your code", "The judge replaying your kernels"))
    judged = worker_files.load_torch(judge / "judged.pt")
    record["judge_sandbox"] = str(judged.get("sandbox"))[:120]  # grading/processes/sandbox.py, where the judge interprets
    return Outcome(problem.id, 0.0, judge_said(judged["error"])) if judged.get("error") else judged


def _judge_timing(problem, judged: dict, judge_seed: int, ceil) -> Outcome:
    m = judged["measurement"]
    if m.get("error"):
        m["error"] = judge_said(m["error"])
    m["sketches"] = [tuple(s) for s in m.get("sketches", [])]
    return _judge_speed_here(problem, judge_seed, m, ceil)


def _judge_speed_here(problem, seed: int, m: dict, ceil) -> Outcome:
    """timing.judge_speed in this process (it rebuilds the timed inputs and references on the GPU): under a class
    queue on the job's GPU and never beside a timing there (GpuSlots.own_gpu_work); grading one notebook runs one
    process at a time anyway."""
    from kernellab.timing import judge_speed
    with _SLOTS.own_gpu_work(_STOP) if _SLOTS is not None else contextlib.nullcontext():
        return judge_speed(problem, seed, m, ceil)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def clamp_points(fraction: float, points: float) -> float:
    """Only finite numbers in [0, points] ever reach nbgrader."""
    if not isinstance(fraction, (int, float)) or not math.isfinite(fraction):
        return 0.0
    return round(max(0.0, min(1.0, float(fraction))) * float(points), 4)


_COURSE_POINTS: dict = {}


def course_points(problem, lesson: str) -> float:
    """The most ``problem`` can score: the points of its test cell in the course's source notebook
    (solutions/<lesson>/, what nbgrader's gradebook holds after generate_assignment), else its registered points.
    Never the submitted notebook's: its metadata is the learner's to write (a cell claiming 400 points for a
    4-point problem was graded out of 400, 2026-11-28)."""
    if lesson not in _COURSE_POINTS:
        import nbformat

        from kernellab.paths import repo_root
        points = {}
        path = repo_root() / "solutions" / lesson / f"{lesson}.ipynb"
        if path.is_file():
            for c in nbformat.read(str(path), as_version=4).cells:
                meta = (c.get("metadata") or {}).get("nbgrader") or {}
                if meta.get("grade") and not meta.get("solution") and isinstance(meta.get("points"), (int, float)):
                    points[meta.get("grade_id")] = float(meta["points"])
        _COURSE_POINTS[lesson] = points
    return _COURSE_POINTS[lesson].get(problem.id, float(problem.points))


def failed(message: str) -> bool:
    """A grading that failed rather than judged: the harness broke, or a process died."""
    m = str(message)
    return m.startswith("Grading this problem failed") or (
        m.startswith(("The process running your code died", "The judge replaying your kernels died")))


def store_key(store, nb, lesson: str, student: str, secret: bytes, problem_id: str, nb_hash: str | None = None):
    from kernellab.grading.judge.store import notebook_hash, secret_fingerprint
    return store.key(lesson, student, nb_hash or notebook_hash(nb), secret_fingerprint(secret), problem_id,
                     f"{DEVICE.name}|{DEVICE.cc}")


def grade_stored(p, nb, lesson: str, student: str, secret: bytes, ceil, facts: dict, env_info: dict,
                 logs_dir=None, store=None, force: bool = False, points: float | None = None,
                 nb_hash: str | None = None, grade=None) -> tuple[tuple, bool]:
    """One problem of one notebook: ((points awarded, max points, message), reused from the store?).
    ``grade(problem, nb, seed, ceil, facts, lesson) -> (Outcome, record)`` grades it (default
    ``grade_problem``, here; a Ray cluster's is grading/classroom/cluster.py's, which sends the seed and never the secret).
    With a ``store``: a stored result is taken as it is (unless ``force``), a new one is stored as soon as it is
    graded (a harness failure is not stored, so a rerun tries again). The audit result.json is written either way."""
    points = course_points(p, lesson) if points is None else points
    key = store_key(store, nb, lesson, student, secret, p.id, nb_hash) if store is not None else None
    entry = store.get(key) if key is not None and not force else None
    if entry is not None:
        fraction, message = entry.get("fraction", 0.0), str(entry.get("message", ""))
        record = dict(entry.get("record") or {})
        record["reused_from_store"] = str(store.path(key))
    elif key is not None and os.environ.get(STORE_ONLY_ENV) == "1":
        fraction, record = 0.0, {"problem": p.id, "kind": p.kind}
        message = f"Grading this problem failed: it is not in the result store and {STORE_ONLY_ENV}=1."
    else:
        seed = problem_seed(secret, student, lesson, p.id)
        started = time.time()
        try:
            outcome, record = (grade or grade_problem)(p, nb, seed, ceil, facts, lesson)
        except Exception as exc:  # noqa: BLE001 - a harness failure costs this problem, not the notebook
            outcome, record = Outcome(p.id, 0.0, f"Grading this problem failed: {type(exc).__name__}: {exc}"), {}
        # The job from start to end, this process's own work (cases, references, judging) included: what its
        # processes' walls and waits leave over is the grading process's share (autograder/benchmarks/class_grading.py).
        record["job_span"] = [round(started, 3), round(time.time(), 3)]
        fraction, message = outcome.fraction, outcome.message
        record.update({"fraction": fraction, "why": message, "details": _jsonable(outcome.details),
                       "environment": env_info, "finished": _now()})
        if key is not None and not message.startswith("Grading this problem failed"):
            store.put(key, {"fraction": _jsonable(fraction), "score": clamp_points(fraction, points),
                            "max_points": points, "message": message, "record": _jsonable(record)})
    score = clamp_points(fraction, points)
    if logs_dir is not None:
        d = pathlib.Path(logs_dir) / student / lesson / p.id
        d.mkdir(parents=True, exist_ok=True)
        record.update({"student": student, "lesson": lesson, "score": score, "max_points": points,
                       "fraction": fraction, "why": message})
        record.setdefault("details", {})
        record.setdefault("environment", env_info)
        record.setdefault("finished", _now())
        (d / "result.json").write_text(json.dumps(_jsonable(record), indent=1))
    return (score, points, message), entry is not None


def grade_notebook(nb, lesson: str, student: str, secret: bytes, logs_dir=None, progress=True,
                   only=None, store=None, force: bool = False) -> dict:
    """grade_id -> (points awarded, max points, message) for every registered problem in ``nb`` (``only``:
    just these grade_ids). ``store`` (a grading.store.Store): take the results it holds for this notebook
    instead of grading again (unless ``force``), and store each new one right after it is graded."""
    from kernellab.ceilings import measure_ceilings
    from kernellab.learner import facts as device_facts
    from kernellab.grading.judge.store import notebook_hash

    problems = problems_of(lesson)
    ceil = measure_ceilings(quiet=True)
    facts = device_facts()
    env_info = _versions()
    nb_hash = notebook_hash(nb) if store is not None else None
    results = {}
    todo = [p for p in problems.values() if not only or p.id in only]
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(todo, desc=f"{student}/{lesson}", file=sys.stdout, leave=False)
    for p in (bar if bar is not None else todo):
        results[p.id], _ = grade_stored(p, nb, lesson, student, secret, ceil, facts, env_info, logs_dir,
                                        store, force, nb_hash=nb_hash)
    return results


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)
