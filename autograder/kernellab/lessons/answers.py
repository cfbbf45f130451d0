"""What the lessons' numeric-answer problems share: answers that follow from earlier ones.

An intensity is FLOPs over bytes, a bound is the intensity against the ridge point, a ratio is one count over
another. A learner whose bytes are wrong but who divided their own numbers correctly has the method right and
one input wrong; "not right" on both says nothing of that. ``follow_on`` judges as the course always has (the
same answers, tolerances and points: a follow-on answer still scores only when it is the right number) and
says, under a wrong follow-on answer that is what the learner's own earlier answers give, that the method is
right and which earlier answer to fix.
"""
from __future__ import annotations

import dataclasses
import math

from ..problems.base import AnswersProblem, Outcome, judge_answers


def _matches(got, expected, rel_tol: float) -> bool:
    if isinstance(expected, str):
        return isinstance(got, str) and got.strip().lower() == expected
    return (isinstance(got, (int, float)) and not isinstance(got, bool) and math.isfinite(got)
            and abs(got - expected) <= rel_tol * abs(expected))


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v != 0


def follow_on(rules: dict):
    """A judge for ``AnswersProblem(judge=...)``. ``rules``: answer name -> (the earlier answers it is computed
    from, (given answers dict, device facts) -> the value those earlier answers imply)."""
    def judge(problem: AnswersProblem, given: dict, facts: dict) -> Outcome:
        out = judge_answers(dataclasses.replace(problem, judge=None), given, facts)
        if out.passed:
            return out
        expected = {a.name: a for a in problem.answers(facts)}
        notes = []
        for name, (inputs, implied) in rules.items():
            a = expected[name]
            got = given.get(name)
            if _matches(got, a.expected, a.rel_tol) or got is None:
                continue
            wrong_inputs = [i for i in inputs if not _matches(given.get(i), expected[i].expected, expected[i].rel_tol)]
            if not wrong_inputs or not all(_number(given.get(i)) or isinstance(given.get(i), str) for i in inputs):
                continue
            try:
                own = implied(given, facts)
            except (ArithmeticError, TypeError, ValueError, KeyError):
                continue
            if _matches(got, own, a.rel_tol if not isinstance(own, str) else 0):
                said = f"{name} = {got!r} is not right. {a.explain}"  # judge_answers' sentence for it
                note = (f"It does follow from your {' and '.join(wrong_inputs)}: the method is right, and it will "
                        f"be right once {'they are' if len(wrong_inputs) > 1 else 'that is'}.")
                notes.append((said, note))
        if notes:
            message = out.message
            for said, note in notes:
                message = message.replace(said, f"{said} {note}", 1) if said in message else f"{message} {note}"
            out = dataclasses.replace(out, message=message, details={**out.details, "follow_on": len(notes)})
        return out
    return judge


def intensity(flops: str | float, nbytes: str):
    """The rule for an intensity: FLOPs (an answer's name, or a number the lesson gives) over an answer's bytes."""
    def implied(given, facts):
        f = given[flops] if isinstance(flops, str) else flops
        return f / given[nbytes]
    return ((flops, nbytes) if isinstance(flops, str) else (nbytes,)), implied


def bound(of: str):
    """The rule for a bound: the learner's own intensity against this GPU's ridge point."""
    return (of,), lambda given, facts: facts["bound"](given[of])


def ratio(top: str, bottom: str):
    return (top, bottom), lambda given, facts: given[top] / given[bottom]
