"""The judge's op rule (op_rules.py) for calls that mix the learner's kernels with PyTorch (lesson 06): the block
and the LayerNorm Function replay to the right answer within their rules, attention written in PyTorch is
refused by the judge even where the worker's own watch was switched off, and each clause of a rule can fail."""
import pytest
import torch

import kernellab  # noqa: F401  (interpreter mode before triton loads)
from kernellab.grading.judge.judge import replay_case
from kernellab.lessons import problems_of
from kernellab.lessons.l06_profile_first import problems as L6
from kernellab.notebook_cells import load_solution
from kernellab.op_rules import Budget, OpRule, RuleBroken, tally
from kernellab.problems.base import compare_outputs, run_case, seeded_generator
from kernellab.replay import Replay, ReplayError

LESSON = "06_profile_first"
P = problems_of(LESSON)


def _first_case(problem):
    return problem.make_cases(seeded_generator(3), False)[0]


def _record(problem, overrides=None):
    ns = load_solution(LESSON, problem.names, overrides=overrides)
    case = _first_case(problem)
    res = run_case(ns[problem.names[0]], problem, case, "cpu", record_call=True)
    assert res.error is None, res.error
    return case, res.record


@pytest.mark.parametrize("pid", ["block_correct", "layernorm_function_correct"])
def test_the_solutions_call_replays_right_well_inside_its_rule(pid):
    problem = P[pid]
    case, rec = _record(problem)
    used, budget = tally(rec, 0), problem.replay_ops.budget(case.inputs)
    # The linear layers' products are exactly what the budget allows; the other ops far below theirs, so that a
    # learner's honest variations fit and attention's quadratic work does not.
    assert used["flops"] == budget.flops
    assert used["forward_elements"] <= budget.forward_elements / 5
    assert used["backward_elements"] <= budget.backward_elements / 2.5
    replayed = replay_case(problem, case, rec, None, "cpu")
    assert replayed.error is None, replayed.error
    verdict = compare_outputs(problem, replayed.output, problem.reference(case), case.label)
    assert verdict.ok, verdict


def test_attention_in_pytorch_is_refused_by_the_judge_though_the_workers_watch_let_it_pass(monkeypatch):
    """The worker's deny lists are in the learner's reach; switched off here, the record still goes to a judge
    whose rule the learner's code never touched."""
    from kernellab.grading.corpus.entries.l06_block_attention_per_head import _BLOCK_PER_HEAD_MM
    from kernellab.grading.corpus.entries.l06_block_in_elementwise_pytorch import _BLOCK_ELEMENTWISE
    monkeypatch.setattr(L6, "BLOCK_FORWARD_DENY", frozenset())
    monkeypatch.setattr(L6, "BLOCK_BACKWARD_DENY", frozenset())
    for source, says in ((_BLOCK_ELEMENTWISE, "The forward ran torch"), (_BLOCK_PER_HEAD_MM, "neither is a weight")):
        case, rec = _record(P["block_correct"], {"block_code": source})
        replayed = replay_case(P["block_correct"], case, rec, None, "cpu")
        assert replayed.error and says in replayed.error, replayed.error


# ---------------------------------------------------------------- each clause of a rule, on small records
def _view(buf, shape, dtype="float32"):
    strides, step = [], 1
    for n in reversed(shape):
        strides.insert(0, step)
        step *= n
    return {"buf": buf, "offset": 0, "shape": list(shape), "strides": strides, "dtype": dtype}


def _mm(a, b, out_buf, name="aten.mm.default"):
    return {"op": "aten", "name": name, "args": {"l": [{"t": a}, {"t": b}]}, "kwargs": {"d": {}},
            "out": [{"new": out_buf, "view": _view(out_buf, [a["shape"][0], b["shape"][1]])}]}


def _elementwise(src, out_buf, name="aten.mul.Tensor"):
    return {"op": "aten", "name": name, "args": {"l": [{"t": src}, {"t": src}]}, "kwargs": {"d": {}},
            "out": [{"new": out_buf, "view": dict(src, buf=out_buf)}]}


T, D = 8, 4  # tokens, width
RULE = OpRule(forward=frozenset({"mm", "mul"}), backward=frozenset({"mm", "mul"}), output=0, weights=(1,),
              budget=lambda inputs: Budget(tokens=T, flops=2 * 2.0 * T * D * D, forward_elements=2 * T * D,
                                           backward_elements=2 * T * D), why="(the rule)")
INPUTS = [torch.zeros(T, D), torch.zeros(D, D)]
X, W = _view(0, [T, D]), _view(1, [D, D])
OUT = 2  # the kept output's buffer


def _rec(forward, backward):
    """Buffers: x, w (inputs), the kept output, then one per op; the forward ends at the copy into the output."""
    n_ops = len(forward) + len(backward)
    buffers = [{"kind": "input", "index": 0}, {"kind": "input", "index": 1},
               {"kind": "alloc", "fill": "poison", "shape": [T, D], "strides": [D, 1], "dtype": "float32"}]
    buffers += [{"kind": "op", "dtype": "float32"}] * n_ops
    keep = {"op": "copy", "src": X, "dst": _view(OUT, [T, D])}
    return {"buffers": buffers, "events": forward + [keep] + backward, "outputs": [_view(OUT, [T, D])],
            "kernels": {}, "problem": None, "tuple": False}


def test_a_record_within_the_rule_passes():
    RULE.check(_rec([_mm(X, W, 3), _elementwise(X, 4)], [_mm(_view(3, [D, T]), X, 5)]), INPUTS)  # dW = dY^T x


@pytest.mark.parametrize("forward, backward, says", [
    ([_mm(X, _view(0, [D, T]), 3)], [], "neither is a weight"),  # x x^T: tokens against tokens
    ([_elementwise(X, 3, "aten.exp.default")], [], "ran torch exp, which it may not"),
    ([_mm(X, W, 3), _mm(X, W, 4), _mm(X, W, 5)], [], "more than the linear layers'"),
    ([_elementwise(X, 3), _elementwise(X, 4), _elementwise(X, 5)], [], "The forward's PyTorch ops wrote 96"),
    ([], [_elementwise(X, 3) | {"out": [{"view": _view(OUT, [T, D])}]}], "wrote the forward's output"),
])
def test_each_clause_of_the_rule_refuses(forward, backward, says):
    with pytest.raises(RuleBroken, match=says):
        RULE.check(_rec(forward, backward), INPUTS)


def test_a_record_with_pytorch_ops_and_no_rule_is_refused():
    rec = _rec([_mm(X, W, 3)], [])
    rec["events"].append({"op": "launch", "kernel": "k", "grid": [1, 1, 1], "args": []})
    rec["kernels"] = {"k": {}}
    with pytest.raises(ReplayError, match="computed with PyTorch"):
        Replay(rec, None, "cpu", 2)


def test_a_weight_something_wrote_into_is_no_longer_a_weight():
    """Activations copied into a weight's buffer (and back) would pass the weight clause otherwise."""
    overwrite = {"op": "copy", "src": X, "dst": W}
    with pytest.raises(RuleBroken, match="neither is a weight"):
        RULE.check(_rec([overwrite, _mm(X, W, 3)], []), INPUTS)
    pointer = {"ptr": [1, 0], "dtype": "float32"}
    for args in ([["w", pointer]], [pointer]):  # as the interpreter records a launch, and as a GPU does
        launch = {"op": "launch", "kernel": "k", "grid": [1, 1, 1], "args": args}
        with pytest.raises(RuleBroken, match="neither is a weight"):
            RULE.check(_rec([launch, _mm(X, W, 3)], []), INPUTS)


def test_an_ops_result_just_past_a_buffer_is_a_buffer_of_its_own():
    """On a GPU the caching allocator packs allocations end to end: a result starting where the kept output ends
    was once taken for a write into it (the solution's block lost its points on an H100)."""
    from kernellab.record import OP, Recording
    storage = torch.zeros(32)
    kept, after = storage[:16], storage[16:]

    class Base:  # a buffer over the first half only, as a guarded allocation would be
        base = kept
    rec = Recording([Base()])
    rec.op(torch.ops.aten.add.Tensor, (kept, kept), {}, after)
    assert rec.buffers[-1].kind == OP and rec.events[-1]["out"][0]["new"] == 1


def test_a_record_claiming_another_layout_for_an_ops_result_is_refused():
    """A result's recorded strides are what later views of it assume: the judge's run must lay it out the same."""
    problem = P["layernorm_function_correct"]
    case, rec = _record(problem)
    made = next(o for e in rec["events"] if e["op"] == "aten" for o in e["out"] if o and "new" in o
                and len(o["view"]["shape"]) == 2)
    made["view"]["strides"] = made["view"]["strides"][::-1]
    replayed = replay_case(problem, case, rec, None, "cpu")
    assert replayed.error and "another layout" in replayed.error, replayed.error
