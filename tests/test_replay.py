"""Record and replay (the grade of record's worker and judge), on the CPU interpreter: a recorded call replays
to the right answer on other inputs; what a record may not carry is refused before anything runs."""
import json

import pytest
import torch

import kernellab  # noqa: F401  (interpreter mode before triton loads)
import triton
import triton.language as tl

from kernellab.guarded import guarded_copy
from kernellab.kernel_source import purity_problem
from kernellab.lessons import problems_of
from kernellab.problems.base import Case, run_case, seeded_generator
from kernellab.replay import Replay, ReplayError, signature_problem, validate

ADD = problems_of("01_roofline_vector_add")["add_correct"]

# Kernels live in a source string run like a notebook cell, so that the recorder can read their source.
CELL = '''
import torch
import triton
import triton.language as tl

SCALE = 1.0


@triton.jit
def plus(a, b):
    return a + b * SCALE


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, plus(tl.load(x_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m)), mask=m)


@triton.jit
def unmasked_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
    return out


def add_unmasked(x, y):
    out = torch.empty_like(x)
    unmasked_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
    return out


STEPS = []


def add_one_step_at_a_time(x, y, swallow=False):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, 1, BLOCK=16)
    for i in range(x.numel()):
        try:
            out[i].fill_(0.0)
        except Exception:  # a learner who catches the refusal and goes on
            if not swallow:
                raise
        STEPS.append(i)
    return out


def add_on_host(x, y):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, 1, BLOCK=16)  # a token launch
    for i in range(x.numel()):  # the answer, written as numbers: a replay has only the numbers of its own inputs
        out[i].fill_(float(x[i]) + float(y[i]))
    return out
'''


@pytest.fixture(scope="module")
def ns():
    from kernellab.notebook_cells import exec_cells, new_namespace
    space = new_namespace("01_roofline_vector_add")
    exec_cells([CELL], space, tag="replay-test")
    return space


def _case(n: int, seed: int) -> Case:
    g = torch.Generator().manual_seed(seed)
    return Case(f"n={n}", [torch.randn(n, generator=g), torch.randn(n, generator=g)])


def _record(fn, n=300, seed=1) -> dict:
    r = run_case(fn, ADD, _case(n, seed), "cpu", record_call=True)
    assert r.error is None, r.error
    return json.loads(json.dumps({k: v for k, v in r.record.items() if k != "_files"}))  # plain data, as sent


def _replay(rec, case):
    guards = [guarded_copy(t, "cpu") for t in case.inputs]
    rp = Replay(rec, None, "cpu", len(case.inputs))
    return rp, rp.run([g.base for g in guards])


def test_a_recorded_call_replays_right_on_other_inputs(ns):
    rec = _record(ns["add"])
    assert [e["op"] for e in rec["events"]] == ["launch"]
    assert rec["buffers"][2]["kind"] == "alloc" and rec["outputs"][0]["buf"] == 2
    case = _case(300, seed=99)
    rp, (out,) = _replay(rec, case)
    torch.testing.assert_close(out, case.inputs[0] + case.inputs[1])
    assert rp.guards_intact() and rp.extra_bytes() == 0


def test_host_arithmetic_replays_to_the_workers_numbers_not_the_answer(ns):
    rec = _record(ns["add_on_host"], n=40)
    assert sum(e["op"] == "fill" for e in rec["events"]) == 40
    case = _case(40, seed=7)
    _, (out,) = _replay(rec, case)
    assert not torch.allclose(out, case.inputs[0] + case.inputs[1])


def test_a_call_past_the_step_limit_is_stopped_there_and_stays_refused(ns):
    # A call that writes one element per torch call stops at the recorder's limit instead of running its whole loop;
    # catching the refusal only lets the loop run on: the record keeps the refusal, and the judge refuses it.
    from kernellab.record import MAX_EVENTS
    n = MAX_EVENTS + 500
    ns["STEPS"].clear()
    r = run_case(ns["add_one_step_at_a_time"], ADD, _case(n, 1), "cpu", record_call=True)
    assert "too many separate steps" in r.error and len(ns["STEPS"]) == MAX_EVENTS - 1  # the launch is one step
    ns["STEPS"].clear()
    r = run_case(lambda x, y: ns["add_one_step_at_a_time"](x, y, swallow=True), ADD, _case(n, 1), "cpu",
                 record_call=True)
    assert len(ns["STEPS"]) == n and len(r.record["events"]) == MAX_EVENTS
    with pytest.raises(ReplayError, match="too many separate steps"):
        validate(r.record, 2)


def test_an_unmasked_store_lands_in_the_judges_guard(ns):
    # The worker's own guard catches this kernel; a record claiming a masked kernel that is really unmasked
    # (forged in the worker) is caught again by the judge's guards.
    import inspect
    import textwrap
    rec = _record(ns["add"], n=300)
    kid = rec["events"][0]["kernel"]
    unmasked = textwrap.dedent(inspect.getsource(ns["unmasked_kernel"].fn)).replace("unmasked_kernel", "add_kernel")
    rec["kernels"][kid]["source"] = unmasked
    rp, _ = _replay(rec, _case(300, seed=3))
    assert rp.first_output_guard_hit() is not None


def test_records_that_no_honest_call_makes_are_refused(ns):
    rec = _record(ns["add"])
    no_launch = dict(rec, events=[])
    with pytest.raises(ReplayError, match="launched no Triton kernel"):
        validate(no_launch, 2)
    with pytest.raises(ReplayError, match="input the call does not have"):
        validate(dict(rec, buffers=[{"kind": "input", "index": 5}] + rec["buffers"][1:]), 2)
    huge = dict(rec, buffers=rec["buffers"][:2] + [dict(rec["buffers"][2], shape=[1 << 40], strides=[1])])
    with pytest.raises(ReplayError, match="GiB"):
        validate(huge, 2)
    launch = dict(rec["events"][0], args=[["x_ptr", {"ptr": [0, 1 << 30], "dtype": "float32"}]] + rec["events"][0]["args"][1:])
    with pytest.raises(ReplayError, match="outside its buffer"):
        _replay(dict(rec, events=[launch]), _case(300, seed=4))
    with pytest.raises(ReplayError, match="cannot be replayed"):
        validate(dict(rec, problem="a kernel argument points to memory made before the call"), 2)


def test_a_pointer_to_memory_made_before_the_call_is_refused(ns):
    scratch = torch.empty(1000)
    src = ("def add_with_scratch(x, y):\n    out = torch.empty_like(x)\n"
           "    add_kernel[(3,)](x, y, SCRATCH, x.numel(), BLOCK=128)\n"
           "    add_kernel[(3,)](x, y, out, x.numel(), BLOCK=128)\n    return out\n")
    from kernellab.notebook_cells import exec_cells
    ns["SCRATCH"] = scratch
    exec_cells([src], ns, tag="replay-test-2")
    r = run_case(ns["add_with_scratch"], ADD, _case(300, 1), "cpu", record_call=True)
    assert "neither an input nor allocated during the call" in r.record["problem"]


def _entry(source, globs=None, kernels=None):
    return {"name": "k", "source": source, "globals": globs or {}, "kernels": kernels or {}}


KERNEL = "def k(x_ptr, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n    {body}\n"
TL = {"tl": {"module": "triton.language"}}


@pytest.mark.parametrize("body, why", [
    ("tl.store(x_ptr + offs, helper(offs))", "may only call @triton.jit functions"),
    ("tl.store(x_ptr + offs, (lambda v: v)(offs))", "lambda"),
    ("tl.store(x_ptr + offs, offs.__class__)", "private attribute"),
    ("import os", "import"),
    ("tl.store(x_ptr + offs, np.sum(offs))", "module `numpy`"),
    ("tl.store(x_ptr + offs, [v for v in offs])", "listcomp"),
    ("triton.knobs.re.enum.bltns.exec('x = 1', {})", "not the language"),  # Python's builtins, via re and enum
    ("tl.core.builtins.exec('x = 1')", "not part of the Triton language"),
    ("tl.store(x_ptr + offs, offs.handle.data.sum())", "values do not have"),  # the interpreter's numpy array
    ("tl.static_print('a\\ndef k(x_ptr, n, BLOCK):')", "across lines"),
])
def test_kernels_that_are_not_pure_triton_are_refused(body, why):
    globs = dict(TL, helper={"other": "function"}, np={"module": "numpy"}, triton={"module": "triton"})
    assert why in (purity_problem(_entry(KERNEL.format(body=body), globs)) or "")


def test_a_docstring_is_not_what_the_judge_runs():
    """The interpreter finds a kernel in its source by its last ``def`` line: a docstring holding one, and the body
    it wanted run, was run in place of the checked body (a red-team kernel). The judge drops the docstring."""
    from kernellab.kernel_source import _function
    src = ('def k(x_ptr, n, BLOCK: tl.constexpr):\n    """Adds.\ndef k(x_ptr, n, BLOCK):\n    exec(PAYLOAD)\n    #"""\n'
           '    offs = tl.arange(0, BLOCK)\n')
    assert purity_problem(_entry(src, TL)) is None  # what remains is pure
    import ast
    assert "exec" not in ast.unparse(_function(src)) and "Adds" not in ast.unparse(_function(src))


def test_pure_kernels_pass_the_check():
    body = "tl.store(x_ptr + offs, tl.where(offs < n, plus(offs, 1), 0).to(tl.float32), mask=offs < BLOCK)"
    assert purity_problem(_entry(KERNEL.format(body=body), dict(TL, SCALE={"const": 2.0}),
                                 {"plus": "src_plus"})) is None


@pytest.mark.parametrize("ty, ok", [("*fp16", True), ("i32", True), ("constexpr", True), ("*kfp32", True),
                                    ("i32) { system(\"x\"); } //", False), ("tensordesc<fp16[64, 64]>", False)])
def test_launcher_types_are_checked_before_triton_writes_c_from_them(ty, ok):
    entry = {"signature": {"a": ty}, "arg_names": ["a"]}
    why = signature_problem(entry, {"target": {"backend": "cuda"}, "name": "add_kernel"})
    assert (why is None) == ok, why


def test_kernels_generated_by_torch_compile_are_not_the_learners():
    entry = {"signature": {"a": "*fp16"}, "arg_names": ["a"]}
    why = signature_problem(entry, {"target": {"backend": "cuda"}, "name": "triton_poi_fused_add_0"})
    assert why and "torch.compile" in why
    assert signature_problem(entry, {"target": {"backend": "cuda"}, "name": "triton_add_kernel"}) is None


def test_the_worker_gets_the_cases_shapes_not_their_values():
    from kernellab.grading.judge.harness import decoy_case
    case = problems_of("03_fused_softmax_layernorm")["add_layernorm_correct"].make_cases(seeded_generator(5), False)[-1]
    decoy = decoy_case(case, torch.Generator().manual_seed(1))
    for a, b in zip(case.inputs, decoy.inputs):
        if isinstance(a, torch.Tensor):
            assert a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
            assert not torch.equal(a, b)
        else:
            assert a == b
    assert decoy.kwargs == case.kwargs and decoy.label == case.label


def test_warming_up_pays_the_first_dispatch_modes_import_ahead():
    # A speed problem's worker warms up while it loads (child.py): the first dispatch mode a process enters imports
    # torch._dynamo, which would otherwise fall in the recorded call after tuning, while timed processes wait.
    import subprocess
    import sys
    code = ("import sys, kernellab, torch\nfrom kernellab.watch import warm_up\n"
            "before = 'torch._dynamo' in sys.modules\nwarm_up()\nprint(before, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]


def test_timed_runs_start_from_poisoned_memory(ns):
    # What a call allocates is all-ones bytes (NaN) before each timed run: nothing a kernel left in its own memory
    # on the run before survives. A replay built from a record whose kernel writes nothing shows what it starts from.
    from kernellab.grading.judge.judge import replay_function
    rec = _record(ns["add"])
    case = _case(300, seed=5)
    run = replay_function(rec, None, "cpu")
    out = run(*case.inputs)  # an untimed warm-up: plain memory, then the answer
    torch.testing.assert_close(out, case.inputs[0] + case.inputs[1])
    run.before_timed_call()
    (buf,) = run.replay().timed_buffers.values()
    assert torch.isnan(buf).all()
    rec["events"][0]["grid"] = [0, 1, 1]  # the same call launching no program: the output stays as poisoned
    run = replay_function(rec, None, "cpu")
    run(*case.inputs)
    run.before_timed_call()
    assert torch.isnan(run(*case.inputs)).all()


def test_a_records_kernel_metadata_and_allocations_are_bounded_before_anything_is_allocated(ns):
    from kernellab.grading.judge.harness import JUDGE_SAID_MAX, judge_said
    from kernellab.replay import metadata_problem, scratch_problem
    honest = {"shared": 49152, "num_warps": 8, "num_ctas": 1, "global_scratch_size": 0, "cluster_dims": [1, 1, 1]}
    assert metadata_problem(honest) is None
    assert "global_scratch_size" in metadata_problem(dict(honest, global_scratch_size=1 << 38))
    assert "shared" in metadata_problem(dict(honest, shared=1 << 30))
    assert "warps" in metadata_problem(dict(honest, num_warps=3))
    import types
    assert scratch_problem(types.SimpleNamespace(global_scratch_size=128), (132, 1, 1)) is None
    assert "GiB" in scratch_problem(types.SimpleNamespace(global_scratch_size=1 << 16), (1 << 16, 1, 1))
    rec = _record(ns["add"])
    rec["buffers"][2]["shape"] = [(5 << 30) // 4]  # 5 GiB of float32 for 2.4 KB of inputs
    rec["buffers"][2]["strides"] = [1]
    with pytest.raises(ReplayError, match="more than any problem here needs"):
        _replay(rec, _case(300, seed=3))
    said = judge_said("line one\nline\x00two " + "x" * 1000)
    assert len(said) == JUDGE_SAID_MAX and "\n" not in said and "\x00" not in said
