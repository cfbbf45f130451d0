"""Lessons 04 and 05 without nbgrader: the tile schedule the widget draws, the memory bound, answers with
several tensors, and the autograd.Function check's refusals."""
import pytest
import torch

from kernellab.bench import load_solution
from kernellab.build import repo_root
from kernellab.grading.submissions import known_wrong, read
from kernellab.learner import _correctness
from kernellab.lessons import lesson04 as L4
from kernellab.lessons import lesson05 as L5
from kernellab.problems.base import Case, CorrectnessProblem, pattern_hint

SRC4 = read(repo_root() / "solutions" / L4.LESSON / f"{L4.LESSON}.ipynb")


def test_program_visits_follow_the_kernels_loop_split():
    kinds = [p["kind"] for p in L4.program_visits(1000, 128, 64, True, 3)]  # rows 384..511
    assert kinds[:6] == ["full"] * 6 and kinds[6:8] == ["masked"] * 2 and set(kinds[8:]) == {"skipped"}
    kinds = [p["kind"] for p in L4.program_visits(1000, 128, 64, False, 0)]
    assert kinds == ["full"] * 15 + ["masked"]  # 960..999: the partial block
    last = L4.program_visits(1000, 128, 64, True, 7)  # rows 896..999
    assert [p["kind"] for p in last][-2:] == ["masked", "masked"] and last[-1]["keys"] == (960, 999)


def test_an_n_by_n_scratch_loses_the_memory_points_with_the_numbers():
    wrong = known_wrong(L4.LESSON, SRC4)["scores_scratch"]
    fa = load_solution(L4.LESSON, ("flash_attention",), wrong)["flash_attention"]
    out = _correctness(L4.FLASH_MEMORY, fa)
    assert out.fraction == 0 and "MB besides its outputs" in out.message and "never materialises" in out.message
    good = load_solution(L4.LESSON, ("flash_attention",))["flash_attention"]
    assert _correctness(L4.FLASH_MEMORY, good).passed


def test_returning_only_the_output_says_two_tensors_are_expected():
    good = load_solution(L4.LESSON, ("flash_attention",))["flash_attention"]
    out = _correctness(L4.FLASH, lambda q, k, v, causal: good(q, k, v, causal)[0])
    assert out.fraction == 0 and "expected a tuple of 2 tensors (output, lse)" in out.message


def test_the_function_check_wants_an_autograd_function():
    out = _correctness(L5.FUNCTION, lambda q, k, v, causal: None)
    assert out.fraction == 0 and "torch.autograd.Function" in out.message


def test_no_tag_is_blamed_when_every_case_is_wrong():
    p = CorrectnessProblem("x", 1, ("f",), "f", hints={"tail": "the tail"})
    cases = [Case("a", [], tags=("tail",)), Case("b", [], tags=("tail",))]
    assert pattern_hint(p, cases, {"a", "b"}) == ""
    assert pattern_hint(p, cases + [Case("c", [])], {"a", "b"}) == "the tail "


@pytest.mark.parametrize("answers, right", [((4 * 32 * 16384 ** 2 * 2, 4 * 32 * 16384 * 4, 4 * 4 * 32 * 16384 ** 2 * 128,
                                               128), 4), ((1, 2, 3, 4), 0)])
def test_memory_answers(answers, right):
    from kernellab.problems.base import judge_answers
    out = judge_answers(L4.MEMORY_ANSWERS, dict(zip(L4.MEMORY_ANSWERS.names, answers)), {})
    assert out.details["right"] == right


def test_the_tiny_model_learns_the_same_with_sdpa_on_both_sides():
    # the training loop itself, with SDPA standing in for the learner's Function (fast on the CPU)
    class Sdpa(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal):
            return L5.attention_sdpa(q.float(), k.float(), v.float(), causal).half()
    Sdpa.apply = staticmethod(lambda q, k, v, c: L5.attention_sdpa(q.float(), k.float(), v.float(), c).half())
    curves = L5.train_tiny(Sdpa, steps=3, plot=False)
    assert curves["yours"] == pytest.approx(curves["SDPA"], rel=1e-2)
