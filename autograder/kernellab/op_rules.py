"""What PyTorch a replayed call may do: the judge's rule for a problem whose graded call mixes the learner's kernels
with PyTorch ops (lesson 06's block keeps its linear layers in cuBLAS, and its LayerNorm backward may be PyTorch).

The worker records those ops with the launches (record.Recording.op); the judge checks the record against the
problem's ``OpRule`` and then does the ops itself, so the rule holds for what is graded whatever the learner's
code did to the worker's own op watch. A rule splits the call at the copy that keeps the forward's output
(the problem's call hook makes it before the backward) and says, per phase:

- which ops may run (by name: views need no mention, they are not recorded);
- that matrix products are the linear layers' own: one operand is a weight (or made from weights alone: a cast),
  or (a weight's gradient) the product
  has a weight's shape and sums over the tokens; and together they do no more FLOPs than the layers need, so
  attention's products (Q K^T, P V and their gradients) cannot be among them;
- how many elements the other ops may write, a few times what the course's solution writes, far below what
  attention written from element-wise ops needs (it grows with the sequence length squared);
- that nothing after the forward writes the forward's output.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from .invoke import Refused
from .record import INPUT

MATMULS = frozenset({"mm", "addmm"})


class RuleBroken(Refused):
    """The record does what the problem's rule forbids; the message says what, for the learner."""


@dataclasses.dataclass(frozen=True)
class Budget:
    tokens: int  # rows of the activations (B * N): what a weight gradient's product sums over
    flops: float  # the linear layers' matrix products, forward and backward
    forward_elements: float  # elements the forward's other ops may write
    backward_elements: float


@dataclasses.dataclass(frozen=True)
class OpRule:
    forward: frozenset  # op names (aten packets) the forward may run
    backward: frozenset  # and the backward
    output: int  # the output whose copy ends the forward
    weights: tuple  # input indices that are weight matrices
    budget: Callable[[list], Budget]  # the call's inputs -> what it may spend
    why: str  # the lesson's rule, said with every refusal
    split: bool = True  # False: a forward alone (a timed forward), no kept copy to split at

    def op(self, name: str):
        """The OpOverload a record names, if the rule allows it anywhere (the phase is checked before the run)."""
        parts = str(name).split(".")
        if len(parts) != 3 or parts[0] != "aten" or parts[1] not in self.forward | self.backward:
            raise RuleBroken(f"The call ran {name}, which the judge does not run here. {self.why}")
        return getattr(getattr(torch.ops.aten, parts[1]), parts[2])

    def check(self, rec: dict, inputs: list) -> None:
        """Raise RuleBroken unless every recorded op is one this call may make, within its budget."""
        events, buffers = rec["events"], rec["buffers"]
        out_buf = rec["outputs"][self.output]["buf"]
        end = _forward_end(events, out_buf) if self.split else len(events)
        if end is None:
            raise RuleBroken("The record does not keep the forward's output before the backward.")
        budget = self.budget(inputs)
        weight_bufs = {i for i, b in enumerate(buffers) if b["kind"] == INPUT and b["index"] in self.weights}
        weight_shapes = {tuple(inputs[i].shape) for i in self.weights} | {tuple(inputs[i].shape)[::-1]
                                                                          for i in self.weights}
        flops, written = 0.0, [0, 0]
        for i, e in enumerate(events):
            phase = 0 if i < end else 1
            touched = _written(e)
            if i > end and out_buf in touched:
                raise RuleBroken("The backward wrote the forward's output: the output is what the forward left. "
                                 + self.why)
            weight_bufs -= touched  # a weight something wrote into may hold anything now
            if e.get("op") != "aten":
                continue
            name = e["name"].split(".")[1]
            if name not in (self.forward if phase == 0 else self.backward):
                raise RuleBroken(f"The {('forward', 'backward')[phase]} ran torch {name}, which it may not. {self.why}")
            if name in MATMULS:
                a, b, (m, k, n) = _product(e)
                flops += 2.0 * m * k * n
                of_a_weight = a["buf"] in weight_bufs or b["buf"] in weight_bufs
                weights_gradient = phase == 1 and (m, n) in weight_shapes and k == budget.tokens
                if not (of_a_weight or weights_gradient):
                    raise RuleBroken(
                        f"The {('forward', 'backward')[phase]} multiplied a {m}x{k} by a {k}x{n} matrix with torch "
                        f"{name}: neither is a weight, nor is the product a weight's gradient. Attention's products "
                        f"belong in your kernels. {self.why}")
            else:
                tensors = _operands(e)
                if tensors and all(t["buf"] in weight_bufs for t in tensors):
                    # a weight cast or scaled (w.float()) is still that weight
                    weight_bufs |= {o["new"] for o in e["out"] if o and "new" in o}
                written[phase] += _elements(e)
        if flops > budget.flops * 1.001:
            raise RuleBroken(f"The call's matrix products did {flops / 1e6:.2f} MFLOP, more than the linear layers' "
                             f"{budget.flops / 1e6:.2f}: attention's products belong in your kernels. {self.why}")
        for phase, (got, most) in enumerate(zip(written, (budget.forward_elements, budget.backward_elements))):
            if got > most:
                raise RuleBroken(
                    f"The {('forward', 'backward')[phase]}'s PyTorch ops wrote {got:,} elements, more than "
                    f"{most:,.0f}, which is a few times what this step needs besides its kernels: work that "
                    f"belongs in your kernels was done with PyTorch. {self.why}")


def _operands(e: dict) -> list:
    """The tensors (views) a recorded op was given, in order."""
    return [a["t"] for a in e["args"]["l"] if isinstance(a, dict) and "t" in a]


def _product(e: dict) -> tuple:
    """A matrix product's two matrices (the last two tensors: addmm's bias comes first) and its (m, k, n)."""
    a, b = _operands(e)[-2:]
    if len(a["shape"]) != 2 or len(b["shape"]) != 2:
        raise RuleBroken(f"The call ran {e['name']} on tensors of {len(a['shape'])} dimensions.")
    return a, b, (a["shape"][0], a["shape"][1], b["shape"][1])


def _elements(e: dict) -> int:
    """Elements a recorded op wrote: the sizes of its results."""
    total = 0
    for o in e["out"]:
        if o:
            n = 1
            for size in o["view"]["shape"]:
                n *= int(size)
            total += n
    return total


def _written(e: dict) -> set:
    """The buffers event ``e`` may write besides those it makes (a launch: every one it gets a pointer into)."""
    op = e.get("op")
    if op == "launch":
        # interpreted launches record [name, argument] pairs, compiled ones the arguments alone
        args = [a[1] if isinstance(a, list) else a for a in e.get("args", [])]
        return {a["ptr"][0] for a in args if isinstance(a, dict) and "ptr" in a}
    if op in ("zero", "fill"):
        return {e["view"]["buf"]}
    if op == "copy":
        return {e["dst"]["buf"]}
    if op == "aten":
        return {o["view"]["buf"] for o in e.get("out", []) if o and "new" not in o}
    return set()


def _forward_end(events: list, out_buf: int) -> int | None:
    """The index of the copy that keeps the forward's output (the call hook's), or None."""
    return next((i for i, e in enumerate(events) if e.get("op") == "copy" and e["dst"]["buf"] == out_buf), None)


def tally(rec: dict, output: int | None) -> dict:
    """What a record's PyTorch ops did per phase (for setting budgets and for tests): matrix-product FLOPs and
    elements the other ops wrote (``output`` None: a forward alone)."""
    events = rec["events"]
    end = len(events) if output is None else _forward_end(events, rec["outputs"][output]["buf"])
    res = {"flops": 0.0, "forward_elements": 0, "backward_elements": 0, "ops": {}}
    for i, e in enumerate(events):
        if e.get("op") != "aten":
            continue
        name = e["name"].split(".")[1]
        res["ops"][name] = res["ops"].get(name, 0) + 1
        if name in MATMULS:
            m, k, n = _product(e)[2]
            res["flops"] += 2.0 * m * k * n
        else:
            res["forward_elements" if i < end else "backward_elements"] += _elements(e)
    return res


__all__ = ["Budget", "OpRule", "RuleBroken", "tally"]
