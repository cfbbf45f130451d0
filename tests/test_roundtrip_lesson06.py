"""Lesson 06 through the instructor's round trip (nbgrader generate, autograde, feedback, export): the
solution, the blank release, a LayerNorm backward without its mean terms, and the library's attention in
place of the learner's."""
import pytest

from kernellab.grading.instructor.dryrun import differs
from roundtrip_checks import assert_blank_scores_zero, assert_feedback_and_export_cover, assert_solution_scores, grade_known_wrong

L = "06_profile_first"
CORRECTNESS = {"layernorm_function_correct": 3, "block_correct": 4}
GPU_ONLY = {"answers_profile", "block_speed", "block_train_speed"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_known_wrong(tmp_path_factory, L, {
        "ln_without_mean_terms": ("ln_without_mean_terms",), "sdpa_in_block": ("sdpa_in_block",)})


def test_solution_gets_every_correctness_point_and_gpu_items_say_gpu_only(graded):
    course, grades, scores = graded
    assert_solution_scores(course, grades, scores, L, CORRECTNESS, GPU_ONLY)


def test_blank_release_scores_zero(graded):
    course, _, scores = graded
    assert_blank_scores_zero(course, scores, L, ("layernorm_function_correct", "block_correct"))


def test_layernorm_backward_without_mean_terms_is_named_and_costs_the_block_too(graded):
    course, _, scores = graded
    assert differs(scores["solution"], scores["ln_without_mean_terms"]) == {"layernorm_function_correct",
                                                                             "block_correct"}
    assert "the gradient through the mean and the variance is missing" in course.result(
        L, "ln_without_mean_terms", "layernorm_function_correct")["why"]


def test_sdpa_in_the_block_is_refused_and_costs_nothing_else(graded):
    course, _, scores = graded
    assert differs(scores["solution"], scores["sdpa_in_block"]) == {"block_correct"}
    why = course.result(L, "sdpa_in_block", "block_correct")["why"]
    assert "scaled_dot_product" in why and "must run in your Triton kernels" in why


def test_feedback_and_export_cover_every_student(graded):
    assert_feedback_and_export_cover(*graded, L)
