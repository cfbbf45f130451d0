"""Lesson 08 through the instructor's round trip (nbgrader generate, autograde, feedback, export) on the CPU, where
the TMA kernels run in Triton's interpreter: the solution, the blank release, a matmul with no path for rows TMA
refuses, FP8 scales applied twice, an attention whose partial key block runs unmasked, and SDPA behind a token
launch of the learner's attention kernel."""
import pytest

from kernellab.grading.instructor.dryrun import differs
from roundtrip_checks import assert_blank_scores_zero, assert_feedback_and_export_cover, assert_solution_scores, grade_known_wrong

L = "08_hopper"
CORRECTNESS = {"answers_tma": 2, "tma_matmul_correct": 4, "fp8_matmul_correct": 3, "tma_attention_correct": 3}
GPU_ONLY = {"tma_matmul_speed", "misaligned_speed", "fp8_speed", "tma_attention_speed"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_known_wrong(tmp_path_factory, L, {
        "three_bugs": ("no_padding", "scale_twice", "zero_filled_keys"), "sdpa": ("sdpa_behind_launch",)})


def test_solution_gets_every_correctness_point_and_speed_says_gpu_only(graded):
    course, grades, scores = graded
    assert_solution_scores(course, grades, scores, L, CORRECTNESS, GPU_ONLY)


def test_blank_release_scores_zero(graded):
    course, _, scores = graded
    assert_blank_scores_zero(course, scores, L, ("tma_matmul_correct", "fp8_matmul_correct"))


def test_each_bug_costs_its_own_problem_with_its_reason(graded):
    course, _, scores = graded
    assert differs(scores["solution"], scores["three_bugs"]) == {"tma_matmul_correct", "fp8_matmul_correct",
                                                                 "tma_attention_correct"}
    why = course.result(L, "three_bugs", "tma_matmul_correct")["why"]
    assert "16-byte" in why or "16 bytes" in why
    assert "scales applied twice" in course.result(L, "three_bugs", "fp8_matmul_correct")["why"]
    assert "-inf" in course.result(L, "three_bugs", "tma_attention_correct")["why"]


def test_the_librarys_attention_behind_a_token_launch_scores_nothing(graded):
    course, _, scores = graded
    assert differs(scores["solution"], scores["sdpa"]) == {"tma_attention_correct"}
    assert scores["sdpa"]["tma_attention_correct"] == 0


def test_feedback_and_export_cover_every_student(graded):
    assert_feedback_and_export_cover(*graded, L)
