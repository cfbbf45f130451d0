"""Learner checks: run a problem in the notebook's own process and answer in seconds.

These give feedback only; the grade of record is computed elsewhere (grading/), so a learner
who patches them fools only themself.
"""
from __future__ import annotations

import os
import sys

from .device import DEVICE
from .problems.base import (AnswersProblem, CorrectnessProblem, FunctionProblem, SpeedProblem, judge_answers,
                            judge_correctness, judge_function, run_correctness, run_function, seeded_generator)
from .report import CheckFailed, say, speed_plot


# What each check said in this session, problem id -> {"fraction", "value", "not_here"}: read by
# `kernellab agree`, which compares it with the grade of record on the same machine. ``not_here``: why the
# check could not judge the problem on this machine (None when it did).
VERDICTS: dict = {}


def _verdict(problem, fraction: float, value=None, not_here: str | None = None) -> None:
    VERDICTS[problem.id] = {"fraction": float(fraction), "value": value, "not_here": not_here}


def _fresh_seed() -> int:
    return int.from_bytes(os.urandom(6), "little")


def facts() -> dict:
    """What an answer may depend on: the measured ceilings of this device."""
    from .ceilings import measure_ceilings
    c = measure_ceilings(quiet=True)
    return {"ridge": c.ridge, "bound": c.bound}


def _correctness(problem: CorrectnessProblem, fn):
    cases = problem.make_cases(seeded_generator(_fresh_seed()), DEVICE.on_gpu)
    return judge_correctness(problem, cases, run_correctness(fn, problem, cases, DEVICE.torch_device))


def _rules(problem, objs) -> None:
    """The grade of record's code rules (code_rules.py), applied here to the notebook cell that defined each
    checked function, so a learner hears about a broken rule before grading."""
    from .code_rules import broken_rules, cell_source_of, explain
    for obj in objs:
        source = cell_source_of(obj) if callable(obj) else None
        why = explain(broken_rules([source]), "The cell defining it") if source else None
        if why:
            raise CheckFailed(f"{problem.title}: {why}")


def check(problem, *objs):
    """Run one problem's check here and now; a failure is one paragraph, partial credit a number."""
    try:
        return _check(problem, *objs)
    except CheckFailed:
        _verdict(problem, 0.0)
        raise


def _check(problem, *objs):
    if not isinstance(problem, AnswersProblem):
        _rules(problem, objs)
    if isinstance(problem, SpeedProblem):
        return _check_speed(problem, objs[0])
    if isinstance(problem, CorrectnessProblem) and problem.max_reads is not None and DEVICE.on_gpu:
        return _check_reads_on_gpu(problem, objs[0])
    if isinstance(problem, CorrectnessProblem):
        out = _correctness(problem, objs[0])
    elif isinstance(problem, FunctionProblem):
        cases = problem.make_cases(seeded_generator(_fresh_seed()))
        out = judge_function(problem, cases, run_function(objs[0], problem, cases))
    elif isinstance(problem, AnswersProblem) and problem.needs_gpu and not DEVICE.on_gpu:
        return _practice_answers(problem, dict(zip(problem.names, objs)))
    elif isinstance(problem, AnswersProblem):
        out = judge_answers(problem, dict(zip(problem.names, objs)), facts())
    else:
        raise TypeError(f"unknown problem type {type(problem).__name__}")
    if out.fraction <= 0:
        raise CheckFailed(f"{problem.title}: {out.message}")
    return _passed(problem, out)


def _passed(problem, out):
    """Says the verdict and returns None: a returned number showed as a stray ``Out[ ]: 0.5`` under the check
    cell, and nothing reads it (the grade of record grades the notebook again; ``kernellab agree`` reads
    VERDICTS)."""
    _verdict(problem, out.fraction, value=out.details.get("value"))
    share = "" if out.passed else f" ({out.fraction * problem.points:.3g} of {problem.points:g} points)"
    say(("✓ " if out.passed else "◐ ") + f"{problem.title}{share}: {out.message}")
    return None


def _practice_answers(problem: AnswersProblem, given: dict):
    """Answers graded only on a GPU (read off a GPU profile): here they are judged against this machine as
    practice and nothing is awarded. Unset answers still fail, as they would anywhere."""
    unset = [n for n, v in given.items() if v is None]
    if unset:
        raise CheckFailed(f"{problem.title}: {', '.join(unset)} not answered yet.")
    out = judge_answers(problem, given, facts())
    _verdict(problem, out.fraction, not_here="these answers are graded only on a GPU")
    say(f"◌ {problem.title}: graded only on a GPU; nothing is awarded here. Practice against this machine: "
        f"{out.message}")
    return None


def _check_reads_on_gpu(problem: CorrectnessProblem, fn):
    """Reads can only be counted in the interpreter: here the result is checked, and the learner told
    that the count is made by the grade of record (which runs this problem on the CPU)."""
    import dataclasses
    out = _correctness(dataclasses.replace(problem, max_reads=None), fn)
    if not out.passed:
        raise CheckFailed(f"{problem.title}: {out.message}")
    _verdict(problem, out.fraction, not_here="reads are counted only in the CPU interpreter; the results are right")
    say(f"◌ {problem.title}: the results are right on this GPU. The reads are counted in Triton's CPU "
        "interpreter, which a GPU session does not run: the grade of record counts them on the CPU. "
        "To count them yourself, open the notebook without a GPU (or set KERNELLAB_FORCE_CPU=1 before "
        "the setup cell) and run this cell.")
    return None


def checker(problem):
    """The notebook's check function for ``problem``: takes the learner's objects in the order of
    ``problem.names`` (its signature says so in help())."""
    import inspect

    def check_fn(*objs):
        return check(problem, *objs)
    check_fn.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in problem.names])
    check_fn.__doc__ = f"Check {problem.title} (graded item `{problem.id}`)."
    return check_fn


def _check_speed(problem: SpeedProblem, fn):
    if problem.precheck is not None:
        out = _correctness(problem.precheck, fn)
        if not out.passed:
            raise CheckFailed(f"{problem.title}: not timed, because the function is not correct yet. {out.message}")
    if problem.below_capability():
        _verdict(problem, 0.0, not_here=f"graded only on sm_{problem.min_capability[0]}{problem.min_capability[1]}+")
        say(f"◌ {problem.title}: {problem.not_gradable_here()}")
        return None
    if not DEVICE.on_gpu:
        _verdict(problem, 0.0, not_here="speed is measured only on a GPU")
        say(f"◌ {problem.title}: speed is only measured on a GPU. This machine runs Triton in its CPU "
            "interpreter, which shows whether a kernel is right but not how fast it would be; nothing is "
            "awarded here. Open the notebook on a GPU (Colab: Runtime > Change runtime type > T4 GPU).")
        return None
    from tqdm.auto import tqdm

    from .ceilings import measure_ceilings
    from .timing import judge_speed, measure_speed

    ceil = measure_ceilings(quiet=True)
    seed = _fresh_seed()
    rounds = 5
    with tqdm(total=rounds, desc=f"timing {problem.names[0]} vs {problem.baseline_name}", file=sys.stdout,
              leave=False) as bar:
        m = measure_speed(fn, problem, seed, rounds=rounds, progress=bar)
    out = judge_speed(problem, seed, m, ceil)
    if m.get("error") or "flagged" in out.details or "sketch_error" in out.details:
        raise CheckFailed(f"{problem.title}: {out.message}")
    score = _passed(problem, out)
    speed_plot(out, problem)
    return score
