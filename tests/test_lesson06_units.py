"""Lesson 06 on the CPU: the profile's cost model and table, the judge of the profile answers, the per-phase
op rules of the block, and the refusals a learner meets."""
import math
import types

import pytest
import torch

from kernellab import profiling
from kernellab.invoke import describe_exception
from kernellab.lessons import lesson06 as L
from kernellab.problems.base import judge_answers, run_correctness, seeded_generator
from kernellab.watch import policy, watched


def test_cost_model_counts_matmuls_softmax_masks_and_copies():
    f, b = profiling.cost("aten::addmm", [[3072], [8192, 1024], [1024, 3072], [], []], 2)
    assert f == 2 * 8192 * 1024 * 3072 and b == 2 * (8192 * 1024 + 1024 * 3072 + 8192 * 3072 + 3072)
    f, b = profiling.cost("aten::bmm", [[64, 2048, 64], [64, 64, 2048]], 2)
    assert f == 2 * 64 * 2048 * 64 * 2048 and b == 2 * 64 * (2048 * 64 * 2 + 2048 * 2048)
    assert profiling.cost("aten::_softmax", [[4, 16, 8, 8], [], []], 2) == (5.0 * 4096, 2 * 2 * 4096)
    # masked_fill_ reads the scores (2 B) and a bool mask (1 B), writes the scores
    assert profiling.cost("aten::masked_fill_", [[2, 3, 5, 5], [5, 5], []], 2) == (150.0, 2 * 150 + 25 + 2 * 150)
    assert profiling.cost("aten::copy_", [[10, 10], [10, 10], []], 4) == (0.0, 800.0)
    assert profiling.cost("aten::copy_", [[], [], []], 4) == (0.0, 0.0)  # a scalar fill value
    assert profiling.cost("aten::frobnicate", [[3]], 2) == (None, None)


def _evt(name, us, shapes):
    return types.SimpleNamespace(name=name, self_cpu_time_total=us, input_shapes=shapes)


def test_table_groups_by_op_per_iteration_and_marks_unmodelled_ops():
    events = [_evt("aten::addmm", 300, [[4], [8, 2], [2, 4]]), _evt("aten::addmm", 100, [[4], [8, 2], [2, 4]]),
              _evt("aten::gelu", 100, [[8, 4]]), _evt("aten::frobnicate", 0, [[1]]), _evt("Optimizer.step", 50, []),
              _evt("aten::frobnicate", 100, [[1]])]
    rows = profiling.table(events, 2, on_gpu=False, iters=2)
    assert [r.op for r in rows] == ["aten::addmm", "aten::gelu", "aten::frobnicate"]
    top = rows[0]
    assert top.calls == 1 and math.isclose(top.ms, 0.2) and math.isclose(top.share, 400 / 600)
    assert top.flops == 2 * 8 * 2 * 4 and top.intensity == top.flops / top.bytes
    assert rows[2].flops is None and rows[2].intensity is None


def test_the_eager_block_profiles_on_the_cpu_with_the_matmuls_modelled():
    rows = L.profile_eager(show=False, plot=False, iters=2)
    by = {r.op: r for r in rows}
    s = L.CPU_SHAPE
    assert math.isclose(sum(r.share for r in rows), 1.0)
    assert by["aten::addmm"].calls == 4
    assert by["aten::addmm"].flops == 2 * s.B * s.N * (4 * s.d * s.d + 2 * s.d * s.mlp)
    assert by["aten::bmm"].flops == 2 * 2 * s.B * s.H * s.N * s.N * (s.d // s.H)


FACTS = {"ridge": 300.0, "profile": [
    {"op": "aten::_softmax", "share": 0.20, "intensity": 0.62},
    {"op": "aten::mul", "share": 0.17, "intensity": 0.25},
    {"op": "aten::addmm", "share": 0.10, "intensity": 600.0},
    {"op": "aten::copy_", "share": 0.09, "intensity": 0.0}]}


def _judge(**given):
    facts = dict(FACTS)
    return L.judge_profile(L.PROFILE_ANSWERS, given, facts)


def test_profile_answers_accept_the_top_op_or_a_near_tie_and_judge_the_rest_for_the_named_op():
    assert _judge(TOP_OP="aten::_softmax", TOP_SHARE=0.21, TOP_INTENSITY=0.6, TOP_BOUND="memory").fraction == 1
    # within 75 % of the top op's time: a different run could have put it first
    assert _judge(TOP_OP="mul", TOP_SHARE=0.15, TOP_INTENSITY=0.25, TOP_BOUND=" Memory ").fraction == 1
    # addmm is not near the top: the other answers are judged for the top op, and addmm's numbers are not its
    out = _judge(TOP_OP="aten::addmm", TOP_SHARE=0.10, TOP_INTENSITY=600.0, TOP_BOUND="compute")
    assert out.fraction == 0 and "this run's profile says aten::_softmax, aten::mul" in out.message
    out = _judge(TOP_OP="aten::_softmax", TOP_SHARE=20, TOP_INTENSITY=0.62, TOP_BOUND="compute")
    assert out.fraction == 0.5 and "give a fraction" in out.message and "memory-bound" in out.message


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, "0.2", True, None, [0.2]])
def test_profile_answers_of_the_wrong_kind_score_nothing_and_do_not_crash(bad):
    out = _judge(TOP_OP=bad, TOP_SHARE=bad, TOP_INTENSITY=bad, TOP_BOUND=bad)
    assert out.fraction == 0 and math.isfinite(out.fraction)


def test_profile_answers_near_the_ridge_accept_either_bound():
    facts = {"ridge": 300.0, "profile": [{"op": "aten::addmm", "share": 0.5, "intensity": 280.0}]}
    for bound in ("memory", "compute"):
        given = {"TOP_OP": "aten::addmm", "TOP_SHARE": 0.5, "TOP_INTENSITY": 280.0, "TOP_BOUND": bound}
        assert L.judge_profile(L.PROFILE_ANSWERS, given, facts).fraction == 1


def test_profile_answers_are_judged_against_a_fresh_trusted_profile(monkeypatch):
    monkeypatch.setattr(L.PROFILE_ANSWERS, "measure", lambda: {"profile": FACTS["profile"]})
    given = dict(zip(L.PROFILE_ANSWERS.names, ("aten::_softmax", 0.2, 0.62, "memory")))
    assert judge_answers(L.PROFILE_ANSWERS, given, {"ridge": 300.0}).fraction == 1
    assert L.PROFILE_ANSWERS.needs_gpu  # CPU op times are too noisy to grade


def test_policy_lets_one_phase_use_cublas_and_refuses_attention_ops():
    a = torch.randn(8, 8)
    with watched() as st:
        with policy(L.BLOCK_FORWARD_DENY, "why"):
            a @ a
            torch.nn.functional.gelu(a)
    assert st.misuse("f") == "f launched no Triton kernel. Launch yours with kernel[grid](...)."
    with watched() as st:
        with policy(L.BLOCK_FORWARD_DENY, "attention must be yours"):
            torch.softmax(a, -1)
        a @ a  # outside the policy: the strict rule of lessons 01-05 again
    assert st.torch_ops == ["torch._softmax", "torch.mm"]
    assert st.misuse("f").endswith("attention must be yours")
    with policy(L.BLOCK_FORWARD_DENY, "no watcher: nothing to do"):
        torch.softmax(a, -1)


def _refusal(problem, fn):
    cases = problem.make_cases(seeded_generator(1), False)[:1]
    res = run_correctness(fn, problem, cases, "cpu")
    return res[0].error


def test_a_block_that_launches_no_kernel_is_refused_with_the_reason():
    def eager_block(x, p, n_heads):
        return L.block_eager(x, p, n_heads, attend=L.attention_sdpa)
    err = _refusal(L.BLOCK, eager_block)
    assert "must run in your Triton kernels" in err or "fewer than 2 Triton kernels" in err


def test_a_layernorm_function_that_is_not_a_function_or_returns_a_tuple_is_refused():
    assert "derived from torch.autograd.Function" in L.LAYERNORM_FUNCTION.validate(lambda *a: None)

    class Tuple(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, r, w, b, eps):
            return x.clone(), r.clone()

        @staticmethod
        def backward(ctx, *g):
            return g[0], g[0], None, None, None
    err = _refusal(L.LAYERNORM_FUNCTION, Tuple)
    assert "launched no Triton kernel" in err or "returned a tuple" in err


def test_refused_says_its_message_whole():
    from kernellab.invoke import Refused
    assert describe_exception(Refused("the reason."), "`f` on case 1") == "`f` on case 1: the reason."


def test_block_reference_matches_eager_in_float32_and_the_flop_count():
    s = L.Shape(1, 24, 32, 2, 64)
    inputs = L.block_inputs(seeded_generator(3), s, torch.float32)
    x, params, dout, H = inputs[0], inputs[1:13], inputs[13], inputs[14]
    ref = L.block_reference(x, params, dout, H)
    out = L.block_eager(x, L.BlockParams(*params), H)
    assert ((out.double() - ref[0]).norm() / ref[0].norm()) < 1e-5
    assert len(ref) == 14 and all(g.shape == t.shape for g, t in zip(ref[2:], params))
    assert L.block_flops(s) == 2 * 24 * (4 * 32 * 32 + 2 * 32 * 64) + 4 * 1 * 2 * 24 * 24 * 16 * 0.5
    assert L.block_flops(s, backward=True) == 3 * L.block_flops(s)


def test_block_benchmark_runs_end_to_end_on_the_cpu(monkeypatch, tmp_path):
    """The GPU benchmark's plumbing with the solution in the interpreter on a small block: the timer replaced
    by fixed times (the solution twice as fast as eager), the profiles real (CPU)."""
    import kernellab.lessons.l06_profile_first.bench as BB
    import kernellab.timing as T

    monkeypatch.setattr(T, "interleaved", lambda fns, rounds, hide_ms=None: {k: 0.5 if k == "yours" else 1.0 for k in fns}
                        | {f"{k}_all": [0.5 if k == "yours" else 1.0] * 2 for k in fns})
    monkeypatch.setattr(T, "do_bench_ms", lambda fns: {k: 0.75 if k == "yours" else 1.25 for k in fns})  # launches paid
    monkeypatch.setattr(L, "GPU_SHAPE", L.Shape(1, 40, 64, 2, 128))
    monkeypatch.setattr(L, "CPU_SHAPE", L.Shape(1, 40, 64, 2, 128))
    res = BB.bench_lesson06(quick=True)
    assert set(res["times"]) == {"eager", "eager + SDPA", "yours"}  # torch.compile only on a GPU
    assert all(v < 1e-2 for v in res["errors"].values()), res["errors"]
    assert res["profile_eager"][0]["share"] >= res["profile_eager"][-1]["share"]
    BB.write_lesson06(res, tmp_path)
    md = (tmp_path / "lesson06.md").read_text()
    assert "| yours | 0.500 | 2.00 |" in md and "measured 2.00 x and 2.00 x" in md and "rounds: 2.00, 2.00" in md
    yours_row = next(line for line in md.splitlines() if line.startswith("| yours |"))
    # do_bench beside the course timer; the host's time per step is measured on a GPU only ("-" here)
    assert yours_row.endswith("| 0.750 | - |") and "step's GPU work" in md
    assert (tmp_path / "lesson06_block.png").exists() and (tmp_path / "lesson06.json").exists()


def test_without_a_gpu_the_profile_check_is_practice_but_unset_answers_fail():
    from kernellab.report import CheckFailed
    with pytest.raises(CheckFailed, match="TOP_SHARE, TOP_BOUND not answered yet"):
        L.check_answers_profile("aten::addmm", None, 1.0, None)
    assert L.check_answers_profile("aten::addmm", 0.5, 70.0, "memory") is None  # judged, never awarded here


def test_regrade_grades_in_fresh_processes_and_reports_the_spread(tmp_path):
    from kernellab.grading.instructor.regrade import regrade, write
    res = regrade(L.LESSON, ["layernorm_function_correct", "block_speed"], times=2, progress=False)
    assert res["layernorm_function_correct"]["scores"] == [3.0, 3.0]
    assert res["block_speed"]["scores"] == [0.0, 0.0] and "only graded on a GPU" in res["block_speed"]["messages"][0]
    md = write(res, L.LESSON, tmp_path)
    assert "| layernorm_function_correct | 2 | 3 |" in md and "| block_speed | 2 | 0 |" in md
    assert (tmp_path / "regrade_06_profile_first.json").exists()


def test_amdahl_and_the_payoff_widget():
    import matplotlib
    matplotlib.use("Agg")
    from kernellab.lessons.l06_profile_first.widgets import amdahl, kernel_payoff
    assert amdahl(0.5, float("inf")) == 2.0
    assert abs(amdahl(0.86, 10) - 1 / (0.14 + 0.086)) < 1e-12
    assert amdahl(0.0, 100) == 1.0 and amdahl(1.0, 4) == 4.0
    ui = kernel_payoff({"bmm": 0.5, "softmax": 0.3, "(all other ops)": 0.2}, chosen=("bmm",))
    pick, fast = ui.children[0].children
    pick.value = ("bmm", "softmax")  # choosing more ops and a faster kernel redraws without error
    fast.value = 50.0
    assert pick.value == ("bmm", "softmax")


def test_lesson06_payoff_reads_the_learners_profile():
    import matplotlib
    matplotlib.use("Agg")
    from kernellab.lessons import lesson06
    from kernellab.profiling import OpRow
    row = lambda op, share: OpRow(op, 1, share, share, None, None)
    ui = lesson06.kernel_payoff([row("aten::bmm", 0.6), row("aten::_softmax", 0.3)])
    assert ui.children[0].children[0].options == ("bmm", "_softmax", "(all other ops)")
    assert ui.children[0].children[0].value == ("bmm",)


@pytest.mark.parametrize("var,value", [("NBGRADER_EXECUTION", "autograde"), ("KERNELLAB_STATIC_WIDGETS", "1")])
def test_headless_runs_get_a_static_picture_instead_of_widgets(monkeypatch, var, value):
    # nbgrader's validate and autograde (and the course's own headless runs) draw the first frame only: no
    # comm traffic that could leave the client waiting (nbclient#312).
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from kernellab.lessons.l06_profile_first.widgets import kernel_payoff
    monkeypatch.setenv(var, value)
    shown = []
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.append(plt.gcf()))
    assert kernel_payoff({"bmm": 0.7, "(all other ops)": 0.3}, chosen=("bmm",)) is None
    assert len(shown) == 1 and "70% of the time, 4.0x faster" in shown[0].axes[0].get_title()
