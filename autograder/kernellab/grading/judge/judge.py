"""The judge process of the grade of record: replay a worker's recorded calls, check and time the replay.

Usage: python -m kernellab.grading.judge.judge JOBDIR PARENT_PID

It never executes learner Python. It reads JOBDIR/judge.json (the problem), JOBDIR/records.json (what the
worker's calls did; a claim) and the kernel files under JOBDIR/kernels, and for a correctness problem the
cases (JOBDIR/cases.pt, the secret-seeded inputs; no references, no seed). It replays each recorded call on
guarded copies of the case's inputs and writes what came out to JOBDIR/judged.pt; the trusted parent
compares that with references it computed itself. For a speed problem it times the replay against the
problem's baseline, interleaved, in this process, where no learner code was ever loaded, so nothing a
submission registers or patches can reach the baseline or the timer.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import sys


def replay_case(problem, case, rec: dict, folder: str, device: str):
    """One recorded call replayed on guarded copies of ``case``'s inputs, as a CallResult."""
    import numpy
    import torch

    from kernellab.guarded import guarded_copy
    from kernellab.invoke import describe_exception, sync
    from kernellab.problems.base import CallResult, returned_tensors, inputs_disturbed
    from kernellab.reads import count_reads
    from kernellab.replay import Replay

    call = f"`{problem.names[0]}` on {case.label}"
    guards = [guarded_copy(t, device) if isinstance(t, torch.Tensor) else None for t in case.inputs]
    views = [g.view for g in guards if g is not None]
    before = [v.clone() for v in views]
    try:
        rp = Replay(rec, folder, device, len(case.inputs), rule=problem.replay_ops)
        # Every element the replay's kernels load or its copies read, per element of the input: the replay
        # reaches only the inputs and its own buffers, so passes over a copy of the input count too.
        counting = (count_reads(views[:1], anywhere=True) if problem.max_reads is not None
                    else contextlib.nullcontext())
        with numpy.errstate(all="ignore"), counting as reads:
            outs = rp.run([g.base if g is not None else None for g in guards], shaped=list(case.inputs))
    except Exception as exc:  # noqa: BLE001 - a refused record, or the learner's kernel failing in the replay
        return CallResult(case.label, error=describe_exception(exc, call))
    err = sync(device)
    if err:
        return CallResult(case.label, error=err)
    out = outs if rec.get("tuple") else (outs[0] if len(outs) == 1 else outs)
    tensors, why = returned_tensors(problem, out, call)
    if why:
        return CallResult(case.label, error=why)
    several = bool(problem.outputs)
    for name, o, kind, want_dtype, want_shape in zip(problem.output_names(), tensors, rp.output_kinds(),
                                                     problem.per_output(problem.out_dtype(case)),
                                                     problem.per_output(problem.out_shape(case))):
        what = f"{call} ({name})" if several else call
        if o.dtype != want_dtype:
            return CallResult(case.label, error=f"{what} returned {o.dtype}; expected {want_dtype}.")
        if kind == "input":
            return CallResult(case.label, error=f"{what} returned one of its inputs: write into a new output tensor.")
        if want_shape is not None and tuple(o.shape) != tuple(want_shape):
            return CallResult(case.label, error=f"{what} returned shape {tuple(o.shape)}; expected {tuple(want_shape)}.")
    hit = rp.first_output_guard_hit()
    if hit is not None or not rp.guards_intact():
        overrun = (f"{call} wrote past the end of its output (at least {hit + 1} element(s) beyond it)."
                   if hit is not None else f"{call} wrote past the end of a buffer it allocated.")
        return CallResult(case.label, overrun=overrun, error=(
            overrun + " Mask the stores of the last block: tl.store(..., mask=offsets < n)."))
    why = inputs_disturbed(call, guards, before)
    if why:
        return CallResult(case.label, error=why)
    results = tuple(o.detach().to("cpu").clone() for o in tensors)
    counted = reads.elements[0] + rp.copied if reads is not None and reads.available else None
    return CallResult(case.label, output=results if several else results[0], reads=counted,
                      extra_bytes=rp.extra_bytes())


def replay_function(rec: dict, folder: str, device: str, rule=None):
    """The recorded call as a function of fresh inputs (timed runs: no guards; every buffer it allocates poisoned
    before each timed run, outside the timing: ``before_timed_call``). The replay is built, and its kernels
    loaded, by the first call: timing's untimed warm-up."""
    from kernellab.replay import Replay
    built = []

    def run(*inputs):
        if not built:
            built.append(Replay(rec, folder, device, len(inputs), rule=rule))
        outs = built[0].run(list(inputs), guarded=False)
        return outs if rec.get("tuple") else outs[0]

    def poison():  # timing calls it before each timed run, outside the timed region
        if built:
            built[0].poison()
    run.before_timed_call = poison
    run.replay = lambda: built[0] if built else None
    return run


def ask_the_compiler(records: list) -> None:
    """Triton's compiler asked at once, in one process, about every launch of every record (kernel_source keeps the
    answers for the replays, which refuse what it refused): one compiler process per judge, in the judge's compile
    phase, not one per replay in its run phase."""
    from kernellab.kernel_source import frontend_problems
    groups: dict = {}
    for rec in records:
        if not isinstance(rec, dict) or not isinstance(rec.get("kernels"), dict):
            continue
        launches = [e for e in rec.get("events", []) if isinstance(e, dict) and e.get("op") == "launch"
                    and isinstance(e.get("args"), list) and rec["kernels"].get(e.get("kernel"), {}).get("kind") == "source"]
        if launches:
            key = json.dumps(rec["kernels"], sort_keys=True, default=str)
            groups.setdefault(key, (rec["kernels"], []))[1].extend(launches)
    for entries, launches in groups.values():
        try:
            frontend_problems(entries, launches)
        except (TypeError, ValueError, KeyError):  # a malformed record: its replay refuses it with the reason
            pass


def _confine_if_interpreting(job_dir: pathlib.Path, device: str) -> str:
    """A judge that replays in Triton's interpreter runs each recorded kernel's body as Python in this process (only
    what passed replay's purity check: docs/GRADE_OF_RECORD.md, residual risk 4); it is confined to its job folder
    as a worker is (sandbox.confine_job) before it runs one, so a body that got past the check still cannot read
    the course's secret, the other jobs' folders or the grading process, or signal them. A judge on a GPU loads
    compiled kernels, builds their launchers itself from checked signatures and runs no learner Python: it is left
    as it was, as nothing there was measured confined."""
    if device != "cpu":
        return "not confined: replays compiled kernels on the GPU (no learner Python)"
    import os
    import tempfile

    from kernellab.grading.processes.sandbox import confine_job
    scratch = job_dir / "scratch"  # temporary files inside the job folder, removed with it
    scratch.mkdir(exist_ok=True)
    tempfile.tempdir = os.environ["TMPDIR"] = str(scratch)
    return confine_job(job_dir)


def main(jobdir: str, parent_pid: int) -> int:
    from kernellab.grading.processes.zygote import die_with_parent
    die_with_parent(parent_pid)
    job_dir = pathlib.Path(jobdir).resolve()
    job = json.loads((job_dir / "judge.json").read_text())
    records = json.loads((job_dir / "records.json").read_text())
    (job_dir / "phase").write_text("import")
    import torch

    import kernellab  # noqa: F401  (GPU or interpreter, before triton loads)
    from kernellab.device import DEVICE
    from kernellab.lessons import problems_of

    problem = problems_of(job["lesson"])[job["problem"]]
    folder = str(job_dir / "kernels")
    device = "cpu" if job.get("interpreted") or not DEVICE.on_gpu else "cuda"
    out = {"error": None, "sandbox": _confine_if_interpreting(job_dir, device)}
    if device == "cpu":  # Triton's compiler asked about every kernel to be interpreted, under the compile budget
        (job_dir / "phase").write_text("compile")
        ask_the_compiler(records)
    (job_dir / "phase").write_text("run")
    if problem.kind == "correctness":
        cases = torch.load(job_dir / "cases.pt", weights_only=False)
        results = []
        for case, rec in zip(list(cases) + list(cases[:1]), records):
            if rec is None:  # the worker's call already failed: the parent says why
                results.append(None)
                continue
            results.append(dataclasses.asdict(replay_case(problem, case, rec, folder, device)))
        out["results"] = results
    elif problem.kind == "speed":
        from kernellab.grading.classroom.gpu_usage import gpu_state
        from kernellab.grading.classroom.slots import ask_for_gpu_alone, ask_to_share
        from kernellab.invoke import describe_exception
        from kernellab.timing import measure_speed
        alone = {}

        def ready():
            # Started, CUDA up, inputs made, kernels loaded and warmed up beside other grading: only now ask for the
            # GPU alone, so that what it holds alone is the timing itself.
            ask_for_gpu_alone(job_dir, "run")
            alone["state"] = gpu_state()  # clocks, power and the driver's reasons, around the timing (the record's)
            alone["retries"] = torch.cuda.memory_stats().get("num_alloc_retries", 0)
        try:
            # A record holds the problem's call hook too, if it has one: the replay is called as it is.
            m = measure_speed(replay_function(records[0], folder, "cuda", problem.replay_ops), problem,
                              job["seed"], watch=False, hook=False, ready=ready)
        except Exception as exc:  # noqa: BLE001 - a refused record, or a kernel failing in a timed run
            m = {"error": describe_exception(exc, f"`{problem.names[0]}` at the timed size")}
        if alone:  # it had the GPU alone (a warm-up that failed never asks)
            # Allocations that failed until the allocator gave back its cache and tried again while the GPU was
            # this process's alone: the timed runs had too little GPU memory (others' memory beside it), and paid.
            m["alloc_retries"] = torch.cuda.memory_stats().get("num_alloc_retries", 0) - alone["retries"]
            m["gpu_state"] = {"before": alone["state"], "after": gpu_state()}
            # Timed: hand the GPU back before writing the result and exiting, which time nothing.
            ask_to_share(job_dir, "run")
        if m.get("sketches"):
            m["sketches"] = [[i, idx, vals] for i, idx, vals in m["sketches"]]
        out["measurement"] = m
    else:
        out["error"] = f"the judge does not replay {problem.kind} problems"
    torch.save(out, job_dir / "judged.pt")
    (job_dir / "phase").write_text("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
