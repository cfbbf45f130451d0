"""Child process of the grade of record: load the learner's cells, run one problem, report.

Usage: python -m kernellab.grading.worker.child JOBDIR PARENT_PID

It reads JOBDIR/job.json (and JOBDIR/cases.pt for correctness problems), writes the phase it
is in to JOBDIR/phase (so the parent can apply separate compile and run budgets), and writes
plain data - tensors, numbers, strings - to JOBDIR/result.pt. The parent judges that data
against references it computed itself; nothing here decides a score.
"""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import sys

from kernellab.grading.processes.zygote import die_with_parent


def _keep_kernels(rows: list, folder: pathlib.Path) -> None:
    """Copy each record's kernel files next to the result; the records keep only the file names."""
    import os
    import shutil
    folder.mkdir(exist_ok=True)
    for row in rows:
        rec = row.get("record")
        if not rec:
            continue
        for name, path in rec.pop("_files", {}).items():
            target = folder / os.path.basename(name)
            if not target.exists():
                shutil.copyfile(path, target)


def _compile_ahead(job: dict, calls: list, start_thread, phase) -> dict | None:
    """The dry pass of grading/worker/compile_ahead.py over ``calls`` where it can gain: a recording worker on a GPU with
    two or more threads to compile on, unless the grading asked for a run without it. Returns its summary (None
    where skipped), with "broke" where the pass left this process's GPU unusable (the grading then runs the
    problem again without it)."""
    from kernellab.device import DEVICE
    from kernellab.grading.worker import compile_ahead
    n = compile_ahead.threads()
    if not (job.get("record") and job.get("compile_ahead", True) and DEVICE.on_gpu and n >= 2):
        return None
    phase("compile-ahead")
    import torch
    summary = compile_ahead.dry_pass(calls, n, start_thread)
    summary["threads"] = n
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - a device-side assert is sticky: nothing more can run here
        summary["broke"] = str(exc)[:300] or type(exc).__name__
    phase("compile")
    return summary


def _dry_calls(problem, fn, cases: list, device: str) -> list:
    """One call per case, on guarded copies like the real run's (the same alignment and strides, so Triton
    specialises the same way), for the dry pass."""
    from kernellab.guarded import guarded_copy
    from kernellab.problems.base import call_learner

    def call(case):
        def once():  # the copies made when called: none where the pass is skipped
            import torch
            views = [guarded_copy(t, device).view if isinstance(t, torch.Tensor) else t for t in case.inputs]
            return call_learner(problem, fn, *views, **case.kwargs)
        return once
    return [call(c) for c in cases]


def _tune_alone(first_call, job_dir: pathlib.Path) -> bool:
    """The first call of a speed problem's worker, which runs beside other grading: compile it with every
    autotuner timing nothing (tuning.compile_only), then, if an autotuner had configurations to choose from, ask
    for the GPU alone (slots.ask_for_gpu_alone, as a judge does before it times) and call again, so the
    choice is timed on a quiet GPU as in serial grading, then give the GPU back to other work
    (slots.ask_to_share): the recorded call that follows times nothing. Returns whether it asked."""
    import torch

    from kernellab.grading.classroom.slots import ask_for_gpu_alone, ask_to_share
    from kernellab.tuning import compile_only, in_rounds
    with compile_only() as picked:
        first_call()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    if not picked:
        return False
    ask_for_gpu_alone(job_dir, "compile")  # the compile budget again, for the tuning
    with in_rounds():  # every configuration timed back and forth, so a GPU's drift does not choose
        first_call()
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # the tuning's kernels have ended before others start beside them
    # On a class's GPU this process held 6 s alone, 5 of them recording (a matmul on an H200): alone time is what
    # a GPU's timed jobs queue for.
    ask_to_share(job_dir, "compile")
    return True


def _record_timed_call(fn, problem, seed: int, folder: pathlib.Path, phase=lambda name: None) -> dict:
    """One watched, recorded call at the timed size, on inputs of this process's own (the judge times the
    replay on its own inputs). Returns {"records": [...]} or {"error": why}. ``phase`` reports its steps ("run":
    the inputs, "run-call": the call, "run-keep": the record and its kernel files), which the process's record
    keeps with their times: on two H200s this call took about 5 s, and other timed work waited behind it."""
    import torch

    from kernellab.guarded import guarded_copy
    from kernellab.invoke import describe_exception
    from kernellab.problems.base import call_learner
    from kernellab.record import recording
    from kernellab.watch import watched

    gen = torch.Generator(device="cuda").manual_seed(seed ^ 0xC0DE)
    inputs = problem.make_inputs(gen, "cuda")
    guards = [guarded_copy(t, "cuda") if isinstance(t, torch.Tensor) else None for t in inputs]
    views = [g.view if g is not None else t for g, t in zip(guards, inputs)]
    call = f"`{problem.names[0]}` at the timed size"
    phase("run-call")
    try:
        with watched() as st, recording(guards, ops=problem.replay_ops is not None) as rec:
            out = call_learner(problem, fn, *views)  # the problem's call hook, recorded with it (replay_call)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        return {"error": describe_exception(exc, call)}
    phase("run-keep")
    if st.misuse(call):
        return {"error": st.misuse(call)}
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if not all(isinstance(o, torch.Tensor) for o in outs):
        return {"error": f"{call} returned {type(out).__name__}, not what the problem asks for."}
    row = {"record": rec.finish(out)}
    _keep_kernels([row], folder)
    return {"records": [row["record"]]}


def main(jobdir: str, parent_pid: int) -> int:
    die_with_parent(parent_pid)
    job_dir = pathlib.Path(jobdir).resolve()
    sys.argv[1:] = []  # the job folder's name stays out of the learner's reach
    job = json.loads((job_dir / "job.json").read_text())

    def phase(name: str) -> None:
        (job_dir / "phase").write_text(name)

    phase("import")
    import torch  # noqa: F401

    import kernellab  # noqa: F401  (chooses GPU or interpreter before triton loads)
    from kernellab.device import DEVICE
    from kernellab.lessons import problems_of
    from kernellab.problems.base import call_learner, run_case, run_correctness, run_function

    # Trusted references, bound before any learner code exists in this process.
    _save, _run_corr, _run_case, _run_fn = torch.save, run_correctness, run_case, run_function
    _call = call_learner
    _asdict = dataclasses.asdict
    problem = problems_of(job["lesson"])[job["problem"]]
    out = {"error": None}

    def finish(**kw) -> int:
        out.update(kw)
        _save(out, job_dir / "result.pt")
        phase("done")
        return 0

    phase("load")
    import os
    import tempfile

    from kernellab.code_rules import broken_rules, explain
    from kernellab.grading.worker import integrity
    from kernellab.notebook_cells import exec_cells, new_namespace
    cases = None
    if problem.kind == "correctness":
        # Correctness covers every autotuning configuration over the shapes, one per shape, timing none
        # (README, "How grading works"): compiling and timing them all at every shape cost minutes.
        from kernellab.tuning import rotate_configs
        rotate_configs()
        # Read, then removed: learner code never finds the inputs on disk.
        cases = torch.load(job_dir / "cases.pt", weights_only=False)
        (job_dir / "cases.pt").unlink()
    elif problem.kind == "speed" and job.get("record"):
        from kernellab.tuning import allow_compile_only
        allow_compile_only()  # patches the autotuner: before the snapshot, which would see it as tampering
        from kernellab.watch import warm_up
        warm_up()  # the recorded call's first dispatch mode, paid here beside other work, not after tuning alone
    why = explain(broken_rules(job["sources"]))
    if why:
        return finish(error=why)
    # Files the learner's code writes land away from the job, in the grader's temporary folder (removed with it).
    scratch = tempfile.mkdtemp(prefix="scratch-", dir=job_dir.parent)
    tempfile.tempdir = os.environ["TMPDIR"] = scratch  # Triton's and ptxas's temporary files too
    from kernellab.grading.worker import compile_ahead
    from kernellab.grading.processes.sandbox import confine_job
    out["sandbox"] = confine_job(job_dir, scratch)  # before any learner code exists in this process
    os.chdir(scratch)
    start_thread = integrity.refuse_threads()  # kept here, out of the learner's namespace
    snapshot = integrity.Snapshot()

    def tampered() -> str | None:
        changed = snapshot.changed()
        return integrity.tampered_message(changed) if changed else None
    ns = new_namespace(job["lesson"])
    for k, src in enumerate(job["sources"]):
        try:
            exec_cells([src], ns, tag=f"your-cell-{k + 1}")
        except SystemExit:
            return finish(error="A cell of yours called exit() while loading.")
        except Exception as exc:  # noqa: BLE001
            from kernellab.invoke import describe_exception
            return finish(error=describe_exception(exc, "Your exercise cell"))

    if tampered():
        return finish(error=tampered())
    if problem.kind == "answers":
        vals = {}
        for name in problem.names:
            v = ns.get(name)
            if isinstance(v, bool) or v is None:
                vals[name] = None
            elif isinstance(v, (int, float)) or (hasattr(v, "item") and getattr(v, "numel", lambda: 0)() == 1):
                f = float(v.item() if hasattr(v, "item") else v)
                vals[name] = f if math.isfinite(f) else None
            elif isinstance(v, str):
                vals[name] = v[:100]
            else:
                vals[name] = None
        return finish(values=vals)

    fn = ns.get(problem.names[0])
    if problem.kind == "function":
        phase("run")
        cases = [(label, [tuple(a) for a in calls]) for label, calls in job["calls"]]
        results = _run_fn(fn, problem, cases)
        return finish(error=tampered(), results=results)
    record = bool(job.get("record"))
    if problem.kind == "correctness":
        if callable(fn):  # every case's kernels compiled at once, under the compile budget
            out["ahead"] = _compile_ahead(job, _dry_calls(problem, fn, cases, DEVICE.torch_device), start_thread,
                                          phase)
            if compile_ahead.broke(out["ahead"]):
                return finish()
        phase("compile")  # first call: Triton compiles (and autotunes) here, under its own budget
        first = _run_case(fn, problem, cases[0], DEVICE.torch_device) if callable(fn) else None
        phase("run")
        results = _run_corr(fn, problem, cases, DEVICE.torch_device, record_calls=record)
        if first is not None and first.error and not any(r.error for r in results):
            results = [first]
        rows = [_asdict(r) for r in results]
        if record:
            _keep_kernels(rows, job_dir / "kernels")
        return finish(error=tampered(), results=rows)

    if problem.kind == "speed":
        if not DEVICE.on_gpu:
            return finish(error="no-gpu")
        if not callable(fn):
            return finish(error=f"There is no function `{problem.names[0]}` to time.")
        phase("compile")
        try:  # compile and autotune at the timed size, under the compile budget
            gen = torch.Generator(device="cuda").manual_seed(job["seed"] ^ 0x5EED)
            warm = problem.make_inputs(gen, "cuda")
            if record:
                from kernellab.tuning import compile_only
                first_call = lambda: _call(problem, fn, *warm)  # noqa: E731
                with compile_only():  # every configuration's compile requested and made at once; the picks forgotten
                    out["ahead"] = _compile_ahead(job, [first_call], start_thread, phase)
                if compile_ahead.broke(out["ahead"]):
                    return finish()
                _tune_alone(first_call, job_dir)
            else:  # every speed problem is replayed (harness.replayable): a worker never times
                return finish(error="this problem's speed is graded from a replay only")
            torch.cuda.synchronize()
            del warm
        except Exception as exc:  # noqa: BLE001
            from kernellab.invoke import describe_exception
            return finish(error=describe_exception(exc, f"`{problem.names[0]}` at the timed size"))
        phase("run")
        # The judge times a replay of this call; nothing is timed here.
        timed = _record_timed_call(fn, problem, job["seed"], job_dir / "kernels", phase)
        return finish(**{**timed, "error": tampered() or timed.get("error")})
    return finish(error=f"unknown problem kind {problem.kind}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
