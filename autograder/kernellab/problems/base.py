"""What a graded problem is, and the two halves of checking it.

``run_*`` functions execute the learner's code (in the notebook for learner checks, in a
throw-away child process for the grade of record) and return plain data. ``judge_*``
functions turn that data into a score and a message; the grade of record runs them in the
trusted parent, which computes every reference itself.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any, Callable

import numpy
import torch

from ..compare import compare
from ..guarded import guarded_copy, same_elements
from ..invoke import describe_exception, signature_problem, sync
from ..reads import count_reads
from ..record import recording
from ..watch import watched


@dataclasses.dataclass
class Case:
    label: str
    inputs: list  # CPU tensors
    kwargs: dict = dataclasses.field(default_factory=dict)
    tags: tuple = ()  # what is special about this case ("k_tail", "a_transposed", ...), for hints


@dataclasses.dataclass
class CallResult:
    label: str
    output: torch.Tensor | None = None
    error: str | None = None
    reads: int | None = None  # elements read from input 0 (counted in the interpreter; None: not counted)
    extra_bytes: int | None = None  # bytes the call allocated besides its outputs (None: not counted)
    record: dict | None = None  # what the call did, for the judge to replay (record.py); worker only
    overrun: str | None = None  # the error's first sentence when the output was written past its end


@dataclasses.dataclass
class Outcome:
    problem: str
    fraction: float  # of the problem's points, in [0, 1]
    message: str
    details: dict = dataclasses.field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.fraction >= 1.0


@dataclasses.dataclass
class Problem:
    id: str  # the nbgrader grade_id of its test cell
    points: float
    names: tuple  # what the learner defines: function or answer variable names
    title: str
    # The oldest GPU whose hardware the problem is about ((9, 0): TMA and Hopper's FP8 tensor cores). Below it a
    # speed problem awards nothing, and a correctness problem runs in the CPU interpreter.
    min_capability: tuple | None = None
    # The judge replays the whole ``call`` of a correctness or speed problem as one recorded call
    # (grading/harness.replayable): lesson 05's Function, forward and backward through autograd (graded in the
    # worker, numpy on .numpy() views behind token launches passed); lesson 06's block and LayerNorm Function and
    # the block's timed forward and step, with ``replay_ops``.
    replay_call: bool = False
    # A call that may use PyTorch ops besides the learner's kernels (lesson 06's block): the judge's op_rules.OpRule
    # for them; the worker records the ops too, and the judge does them itself after checking them against it.
    replay_ops: object = None

    kind = "base"
    needs_gpu = False

    def below_capability(self) -> bool:
        """This machine's GPU (if any) is older than the problem needs."""
        from ..device import DEVICE
        return bool(self.min_capability and DEVICE.on_gpu and DEVICE.capability < tuple(self.min_capability))

    def not_gradable_here(self) -> str | None:
        """Why this machine cannot judge the problem at all (a speed problem without the GPU it is about)."""
        from ..device import DEVICE
        if self.needs_gpu and not DEVICE.on_gpu:
            what = "Speed" if self.kind == "speed" else "This problem (it reads a GPU profile)"
            return f"{what} is only graded on a GPU; this grading machine has none."
        if self.needs_gpu and self.below_capability():
            need = "sm_{}{}".format(*self.min_capability)
            return (f"This is graded only on a GPU of {need} or newer (it times hardware that older GPUs lack); "
                    f"this machine's GPU is {DEVICE.cc}, so nothing is awarded here.")
        return None


# ---------------------------------------------------------------- correctness

@dataclasses.dataclass
class CorrectnessProblem(Problem):
    signature: str = ""
    make_cases: Callable = None  # (generator, on_gpu) -> list[Case]
    reference: Callable = None  # (case) -> float64 CPU tensor
    out_dtype: Callable = None  # (case) -> dtype
    out_shape: Callable = None  # (case) -> shape
    tolerance_repeat: float = 0.0  # repeated runs must agree within this relative error
    hints: dict = dataclasses.field(default_factory=dict)  # case tag -> what it means when only those fail
    # Reads of input 0 allowed per case (None: not counted). Counting needs Triton's interpreter, so
    # the grade of record runs such a problem in a CPU child (``interpreted``) even on a GPU machine.
    max_reads: Callable = None  # (case) -> max elements read, with a sentence saying why
    reads_why: str = ""
    # Known mistakes as alternative references: ((case) -> float64 tensor, what it means). A wrong output
    # that matches one of them gets its sentence (e.g. LayerNorm with the unbiased variance).
    mistakes: tuple = ()
    # Several returned tensors (FlashAttention's output and log-sum-exp): their names, in order. Then
    # out_dtype, out_shape and reference give one value per name.
    outputs: tuple = ()
    # Per output name, a floor on the scale its relative error is measured against (compare.rel_error), for an
    # output whose rounding follows another scale than its own values (attention.LSE_FLOOR: a correct kernel's lse
    # near 0 read 2.4e-5 against fp32's 1e-5).
    norm_floor: dict = dataclasses.field(default_factory=dict)
    # What the check calls instead of fn(*inputs) (fn's forward and backward through autograd, say), and
    # what replaces the signature check for it: (obj) -> why it cannot be used, or None.
    call: Callable = None
    validate: Callable = None
    # Bytes the call may allocate besides its outputs ((case) -> bytes): O(N) memory, not an N x N matrix.
    max_extra_bytes: Callable = None
    extra_bytes_why: str = ""
    # False where the problem lets PyTorch compute part of the result (lesson 06's block: cuBLAS
    # matmuls make the outputs, not an allocation of the learner's); the other checks still apply.
    own_outputs: bool = True

    kind = "correctness"

    @property
    def interpreted(self) -> bool:
        return self.max_reads is not None or self.below_capability()

    @property
    def n_args(self) -> int:
        return self.signature.count(",") + 1 if "()" not in self.signature else 0

    def per_output(self, value) -> tuple:
        """out_dtype / out_shape / reference values as one tuple entry per returned tensor."""
        return tuple(value) if self.outputs else (value,)

    def output_names(self) -> tuple:
        return self.outputs or ("output",)


def call_learner(problem, fn, *args, **kwargs):
    """What a check runs with the learner's ``fn``: the problem's own call hook around it (through
    autograd, say), or ``fn`` itself."""
    call = getattr(problem, "call", None)
    return call(fn, *args, **kwargs) if call is not None else fn(*args, **kwargs)


def returned_tensors(problem: CorrectnessProblem, out, call: str):
    """(tensors, None) when ``out`` has the shape of answer the problem wants, else (None, why)."""
    if out is None:
        return None, f"{call} returned None: return the output tensor{'s' if problem.outputs else ''}."
    if not problem.outputs:
        if not isinstance(out, torch.Tensor):
            return None, f"{call} returned a {type(out).__name__}, not a tensor."
        return (out,), None
    want = ", ".join(problem.outputs)
    if not isinstance(out, (tuple, list)) or len(out) != len(problem.outputs):
        got = f"a {type(out).__name__}" + (f" of {len(out)}" if isinstance(out, (tuple, list)) else "")
        return None, f"{call} returned {got}; expected a tuple of {len(problem.outputs)} tensors ({want})."
    for name, o in zip(problem.outputs, out):
        if not isinstance(o, torch.Tensor):
            return None, f"{call} returned a {type(o).__name__} as {name}, not a tensor."
    return tuple(out), None


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def run_case(fn, problem: CorrectnessProblem, case: Case, device: str, record_call: bool = False) -> CallResult:
    """Run the learner's function once on guarded copies of the case's inputs (``record_call``: and record
    what it does, for a judge to replay; the grade of record's worker)."""
    call = f"`{problem.names[0]}` on {case.label}"
    # Tensors get guarded copies; plain numbers (an eps) are passed as they are.
    guards = [guarded_copy(t, device) if isinstance(t, torch.Tensor) else None for t in case.inputs]
    views = [g.view if g is not None else t for g, t in zip(guards, case.inputs)]
    tensors = [v for v in views if isinstance(v, torch.Tensor)]
    before = [v.clone() for v in tensors]
    try:  # numpy's overflow warnings from the interpreter (exp of a large value) are not the learner's concern
        counting = count_reads(views[:1]) if problem.max_reads is not None else contextlib.nullcontext()
        recorder = recording(guards, ops=problem.replay_ops is not None) if record_call else contextlib.nullcontext()
        with watched() as st, numpy.errstate(all="ignore"), counting as reads, recorder as rec:
            out = call_learner(problem, fn, *views, **case.kwargs)
    except Exception as exc:  # noqa: BLE001 - any learner error becomes a paragraph
        return CallResult(case.label, error=describe_exception(exc, call))
    err = sync(device)
    if err:
        return CallResult(case.label, error=err)
    if st.misuse(call):
        return CallResult(case.label, error=st.misuse(call))
    outs, why = returned_tensors(problem, out, call)
    if why:
        return CallResult(case.label, error=why)
    several = bool(problem.outputs)
    for name, o, want_dtype, want_shape in zip(problem.output_names(), outs, problem.per_output(problem.out_dtype(case)),
                                               problem.per_output(problem.out_shape(case))):
        what = f"{call} ({name})" if several else call
        if str(o.device).split(":")[0] != device:
            return CallResult(case.label, error=(
                f"{what} returned a tensor on {o.device}, but the inputs are on {device}. Allocate the output "
                "on the inputs' device, e.g. torch.empty_like(x)."))
        if o.dtype != want_dtype:
            return CallResult(case.label, error=f"{what} returned {o.dtype}; expected {want_dtype}.")
        if any(o.untyped_storage().data_ptr() == v.untyped_storage().data_ptr() for v in tensors):
            return CallResult(case.label, error=f"{what} returned one of its inputs: write into a new output tensor.")
        if problem.own_outputs and st.owns(o) is None:
            return CallResult(case.label, error=(
                f"{what} returned a tensor that was not allocated during the call (a cached or global buffer?). "
                "Allocate the output inside the function, e.g. torch.empty_like(x)."))
        if want_shape is not None and tuple(o.shape) != tuple(want_shape):
            return CallResult(case.label, error=f"{what} returned shape {tuple(o.shape)}; expected {tuple(want_shape)}.")
    for g in st.allocations:
        hit = g.first_guard_hit()
        if hit is not None:
            overrun = f"{call} wrote past the end of its output (at least {hit + 1} element(s) beyond it)."
            return CallResult(case.label, overrun=overrun, error=(
                overrun + " Mask the stores of the last block: tl.store(..., mask=offsets < n)."))
    why = inputs_disturbed(call, guards, before)
    if why:
        return CallResult(case.label, error=why)
    try:  # a returned Tensor subclass may do anything in clone(): its failure is the call's
        results = tuple(o.detach().to("cpu").clone() for o in outs)
    except Exception as exc:  # noqa: BLE001
        return CallResult(case.label, error=describe_exception(exc, call))
    counted = reads.elements[0] if reads is not None and reads.available else None
    owners = {id(st.owns(o)) for o in outs}
    extra = sum(_nbytes(g.view) for g in st.allocations if id(g) not in owners)
    recorded = rec.finish(out) if rec is not None else None
    return CallResult(case.label, output=results if several else results[0], reads=counted, extra_bytes=extra,
                      record=recorded)


def inputs_disturbed(call: str, guards: list, before: list) -> str | None:
    """Why the call's guarded inputs are not as they were (written past, or changed), or None. Shared by the
    learner's check and the judge's replay."""
    for i, (g, b) in enumerate(zip([g for g in guards if g is not None], before)):
        if not g.guard_intact():
            return f"{call} wrote past the end of input {i}."
        if g.view.dtype != b.dtype or g.view.shape != b.shape or not bool(same_elements(g.view, b).all()):
            return f"{call} changed its input {i}: inputs must stay as they were."
    return None


def run_correctness(fn, problem: CorrectnessProblem, cases: list, device: str, stop_on_error=True,
                    record_calls: bool = False) -> list:
    """Every case, then the first case again (two runs must agree). Stops at the first error."""
    bad = (problem.validate(fn) if problem.validate else
           signature_problem(fn, problem.n_args, problem.names[0], problem.signature))
    if bad:
        return [CallResult("signature", error=bad)]
    results = []
    for case in list(cases) + cases[:1]:
        r = run_case(fn, problem, case, device, record_calls)
        results.append(r)
        if r.error and stop_on_error:
            break
    return results


def judge_correctness(problem: CorrectnessProblem, cases: list, results: list, reference=None) -> Outcome:
    """``reference``: (case) -> the right output, as ``problem.reference`` gives it (the grade of record computes
    it on the GPU where it can: harness.reference_on_gpu)."""
    reference = reference or problem.reference
    details = {"cases": [c.label for c in cases], "errors": {}}
    if not results:
        return Outcome(problem.id, 0.0, "The code produced no results (did the process die?).", details)
    if len(results) == 1 and results[0].label == "signature" and results[0].error:
        return Outcome(problem.id, 0.0, results[0].error, details)
    worst, wrong = 0.0, []
    for case, res in zip(list(cases) + cases[:1], results):
        if res.error:
            # An overrun only where earlier cases passed and this one has a tag they lack (a row stride):
            # that tag's hint, not "mask the stores", says what went wrong.
            ran = list(cases)[:len(results)]
            hint = pattern_hint(problem, ran, {case.label} | {w[0] for w in wrong}) if res.overrun else ""
            return Outcome(problem.id, 0.0, res.overrun + " " + hint.strip() if hint else res.error, details)
        v = compare_outputs(problem, res.output, reference(case), case.label)
        worst = max(worst, v.rel_error or 0.0)
        if not v.ok:
            wrong.append((case.label, v.message))
            continue
        over = _too_many_reads(problem, case, res) if problem.max_reads is not None else ""
        over = over or (_too_much_memory(problem, case, res) if problem.max_extra_bytes is not None else "")
        if over:
            return Outcome(problem.id, 0.0, over, details)
    if wrong:
        # Small cases fail as a whole; a larger one can say *where* it goes wrong (the tail?).
        label, msg = next((w for w in wrong if "from index" in w[1]), wrong[0])
        others = [w[0] for w in wrong if w[0] != label][:3]
        also = f" Also wrong: {'; '.join(others)}." if others else ""
        details["wrong_cases"] = [w[0] for w in wrong]
        hint = mistake_hint(problem, cases, results, {w[0] for w in wrong}) or pattern_hint(
            problem, cases, {w[0] for w in wrong})
        return Outcome(problem.id, 0.0, f"Wrong result for {label}. {hint}{msg}{also}", details)
    if len(results) < len(cases) + 1:
        return Outcome(problem.id, 0.0, f"Only {len(results)} of {len(cases) + 1} calls finished.", details)
    first, again = problem.per_output(results[0].output), problem.per_output(results[-1].output)
    diff = max(compare(b, a.double(), what="repeated output").rel_error or 0.0 for a, b in zip(first, again))
    if diff > problem.tolerance_repeat and not all(torch.equal(a, b) for a, b in zip(first, again)):
        return Outcome(problem.id, 0.0, (
            f"Two runs on the same input disagree (relative difference {diff:.1e}): a race, or a read of "
            "memory nothing wrote?"), details)
    details["worst_rel_error"] = worst
    reads = ""
    if problem.max_reads is not None:
        per = max(r.reads / c.inputs[0].numel() for c, r in zip(list(cases) + cases[:1], results))
        details["reads_per_element"] = per
        reads = f"; at most {per:.2f} reads per input element"
    return Outcome(problem.id, 1.0, f"Correct on all {len(cases)} cases (worst relative error {worst:.1e}{reads}).",
                   details)


def compare_outputs(problem: CorrectnessProblem, output, reference, label: str):
    """One verdict for all of a call's outputs: the first wrong one speaks, the worst error is kept."""
    from ..compare import Verdict
    several = bool(problem.outputs)
    worst = 0.0
    for name, o, r in zip(problem.output_names(), problem.per_output(output), problem.per_output(reference)):
        v = compare(o, r, what=f"{name} ({label})", floor=problem.norm_floor.get(name, 0.0))
        if not v.ok:
            return Verdict(False, v.rel_error, (f"{name}: " if several else "") + v.message)
        worst = max(worst, v.rel_error or 0.0)
    return Verdict(True, worst, "")


def _too_much_memory(problem: CorrectnessProblem, case: Case, res: CallResult) -> str:
    allowed = problem.max_extra_bytes(case)
    if res.extra_bytes is None or res.extra_bytes <= allowed:
        return ""
    return (f"Correct, but on {case.label} the call allocated {res.extra_bytes / 1e6:.2f} MB besides its outputs, "
            f"where at most {allowed / 1e6:.2f} MB are allowed. {problem.extra_bytes_why}")


def _too_many_reads(problem: CorrectnessProblem, case: Case, res: CallResult) -> str:
    if res.reads is None:
        return ("The reads of this problem are counted in Triton's CPU interpreter, and they were not "
                "counted here (not running in the interpreter).")
    n = case.inputs[0].numel()
    allowed = problem.max_reads(case)
    if res.reads <= allowed:
        return ""
    return (f"Correct, but on {case.label} your kernels read {res.reads:,} elements of the input: "
            f"{res.reads / n:.2f} per element, where at most {allowed / n:.2f} are allowed. {problem.reads_why}")


def mistake_hint(problem: CorrectnessProblem, cases: list, results: list, wrong_labels: set) -> str:
    """The sentence of the first known mistake that a wrong output matches exactly, or ""."""
    for case, res in zip(cases, results):
        if case.label not in wrong_labels or res.output is None:
            continue
        for alternative, meaning in problem.mistakes:
            if compare_outputs(problem, res.output, alternative(case), case.label).ok:
                return meaning + " "
    return ""


def pattern_hint(problem: CorrectnessProblem, cases: list, wrong_labels: set) -> str:
    """Name the likely mistake when every failing case has a tag that most passing cases lack (wrong only on
    transposed inputs -> strides; only where K is not a multiple of the block -> K mask). "Most": a mistake
    can be too small to see on some cases of its kind (zero padding of a row whose max is large)."""
    if not problem.hints:
        return ""
    wrong = [set(c.tags) for c in cases if c.label in wrong_labels]
    right = [set(c.tags) for c in cases if c.label not in wrong_labels]
    if not wrong or not right:  # everything wrong: no tag can be blamed
        return ""
    shared = {t for t in set.intersection(*wrong) if sum(t in r for r in right) < len(wrong)}
    said = [problem.hints[t] for t in problem.hints if t in shared]  # the hints are ordered: most specific first
    return said[0] + " " if said else ""


# ---------------------------------------------------------------- pure Python functions

@dataclasses.dataclass
class FunctionProblem(Problem):
    """A plain Python function of integers, checked on the CPU against a reference."""
    signature: str = ""
    make_cases: Callable = None  # (generator) -> list of (label, list of argument tuples)
    reference: Callable = None  # (*args) -> expected result (a tuple of ints)
    diagnose: Callable = None  # (label, calls, got, expected) -> extra words, or ""

    kind = "function"

    @property
    def n_args(self) -> int:
        return self.signature.count(",") + 1


def _plain(value):
    """A result as plain data (tuple of ints), or None when it is not one."""
    if isinstance(value, (tuple, list)):
        items = []
        for v in value:
            if hasattr(v, "item") and getattr(v, "numel", lambda: 2)() == 1:
                v = v.item()
            if isinstance(v, bool) or not isinstance(v, int):
                return None
            items.append(int(v))
        return tuple(items)
    return None


def run_function(fn, problem: FunctionProblem, cases: list) -> list:
    """[{'label', 'output': list of results or None, 'error'}] for each case; stops at an error."""
    bad = signature_problem(fn, problem.n_args, problem.names[0], problem.signature)
    if bad:
        return [{"label": "signature", "output": None, "error": bad}]
    results = []
    for label, calls in cases:
        outs = []
        for args in calls:
            try:
                got = fn(*args)
            except Exception as exc:  # noqa: BLE001
                return results + [{"label": label, "output": None,
                                   "error": describe_exception(exc, f"`{problem.names[0]}{tuple(args)}`")}]
            plain = _plain(got)
            if plain is None:
                return results + [{"label": label, "output": None, "error": (
                    f"`{problem.names[0]}{tuple(args)}` returned {type(got).__name__} {str(got)[:40]}; "
                    "expected a tuple of Python ints.")}]
            outs.append(list(plain))
        results.append({"label": label, "output": outs, "error": None})
    return results


def judge_function(problem: FunctionProblem, cases: list, results: list) -> Outcome:
    if not results:
        return Outcome(problem.id, 0.0, "The code produced no results (did the process die?).")
    for (label, calls), res in zip(cases, results):
        if res.get("error"):
            return Outcome(problem.id, 0.0, res["error"])
        got = [tuple(o) for o in res["output"]]
        want = [tuple(problem.reference(*args)) for args in calls]
        if len(got) != len(want):
            return Outcome(problem.id, 0.0, f"{label}: only {len(got)} of {len(want)} results came back.")
        bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
        if bad:
            i = bad[0]
            extra = problem.diagnose(label, calls, got, want) if problem.diagnose else ""
            return Outcome(problem.id, 0.0, (
                f"{label}: {problem.names[0]}{tuple(calls[i])} returned {got[i]}, expected {want[i]} "
                f"({len(bad)} of {len(want)} calls wrong). {extra}").strip())
    if len(results) < len(cases):
        return Outcome(problem.id, 0.0, f"Only {len(results)} of {len(cases)} cases finished.")
    n = sum(len(c) for _, c in cases)
    return Outcome(problem.id, 1.0, f"Right on all {n} calls in {len(cases)} grids.")


# ---------------------------------------------------------------- numeric answers

@dataclasses.dataclass
class Answer:
    name: str
    expected: Any  # number, or str
    rel_tol: float = 0.01
    explain: str = ""


@dataclasses.dataclass
class AnswersProblem(Problem):
    answers: Callable = None  # (device facts dict) -> list[Answer]
    # Facts measured now by trusted code, merged into the device facts (lesson 06: a fresh profile).
    measure: Callable = None  # () -> dict
    # A judge of its own when an expected value depends on another answer (which op the learner named).
    judge: Callable = None  # (problem, given dict, facts) -> Outcome

    kind = "answers"


def judge_answers(problem: AnswersProblem, given: dict, facts: dict) -> Outcome:
    if problem.measure is not None:
        facts = {**facts, **problem.measure()}
    if problem.judge is not None:
        return problem.judge(problem, given, facts)
    wrong, right = [], 0
    expected = problem.answers(facts)
    for a in expected:
        got = given.get(a.name, None)
        if isinstance(a.expected, str):
            ok = isinstance(got, str) and got.strip().lower() == a.expected
        else:
            ok = (isinstance(got, (int, float)) and not isinstance(got, bool) and math.isfinite(got)
                  and abs(got - a.expected) <= a.rel_tol * abs(a.expected))
        if ok:
            right += 1
        else:
            shown = "not set" if got is None else repr(got)
            wrong.append(f"{a.name} = {shown} is not right. {a.explain}")
    frac = right / len(expected)
    msg = (f"All {len(expected)} answers are right." if not wrong else
           f"{right} of {len(expected)} answers are right. " + " ".join(wrong))
    return Outcome(problem.id, frac, msg, {"right": right, "of": len(expected)})


# ---------------------------------------------------------------- speed

@dataclasses.dataclass
class SpeedProblem(Problem):
    signature: str = ""
    make_inputs: Callable = None  # (generator, device) -> list of CPU tensors
    baseline: Callable = None  # (*inputs) -> output: trusted PyTorch
    baseline_name: str = ""
    reference_at: Callable = None  # (inputs, flat_idx) -> float64 values of the right output there
    bytes_moved: Callable = None  # (inputs) -> minimum bytes the candidate must move
    flops: Callable = None  # (inputs) -> FLOPs the candidate must do (None: not compute-bound)
    baseline_bytes: Callable = None  # (inputs) -> bytes the baseline moves (for bandwidth metrics)
    metric: str = "speedup"  # "speedup": t_base / t_cand; "bandwidth": cand GB/s over base GB/s
    bands: tuple = ()  # ((threshold, fraction), ...) best first
    out_dtype: Callable = None
    precheck: "CorrectnessProblem" = None  # the learner's check runs this first: speed of a wrong kernel is moot
    # A baseline that needs state (the forward graph whose backward is timed): (inputs) -> callable(*inputs)
    baseline_setup: Callable = None
    # Several returned tensors: (output) -> the one flat tensor whose elements are sampled and re-checked
    sketch_of: Callable = None
    # The whole right output as one flat tensor, computed once per input set (instead of reference_at)
    reference_full: Callable = None
    # What timing calls instead of fn(*inputs) (a forward and backward through autograd, say)
    call: Callable = None  # (fn, *inputs) -> output
    # The tensor cores' rate for the problem's number format over fp16's (FP8 on Hopper: 2): the physical floor
    # a time must not beat scales the measured fp16 ceiling by it.
    flop_rate: float = 1.0
    # The host's time per call that the timer hides (ms; timing.gpu_wait): None hides ~0.5-1 ms, a few launches.
    # A whole training step sets timing.STEP_HOST_MS, so that both sides are timed by their GPU work alone.
    host_ms: float | None = None

    kind = "speed"
    needs_gpu = True

    def band(self, value: float) -> tuple[float, str]:
        for threshold, frac in self.bands:
            if value >= threshold:
                return frac, f">= {threshold:g}"
        return 0.0, f"< {self.bands[-1][0]:g}"


SKETCH = 2048  # output elements sampled and re-checked after every timed run


def is_autograd_function(name: str, methods: str = "forward(ctx, ...) and backward(ctx, ...)"):
    """A problem's ``validate`` for a learner's ``torch.autograd.Function`` subclass called ``name`` (``methods``: the
    static methods it must have, as the message names them)."""
    def check(obj):
        if isinstance(obj, type) and issubclass(obj, torch.autograd.Function):
            return None
        if obj is None:
            return f"There is no class `{name}`: define it in the exercise cell and run it."
        return (f"`{name}` is a {type(obj).__name__}; it must be a class derived from torch.autograd.Function, "
                f"with static {methods} methods.")
    return check


def seeded_generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g
