"""Lesson 10 through the instructor's round trip (nbgrader generate, autograde, feedback, export): the solution,
the blank release, and wrong submissions that must lose exactly what they break. One course for the file."""
import pytest

from kernellab.grading.instructor.dryrun import differs
from roundtrip_checks import assert_blank_scores_zero, assert_feedback_and_export_cover, assert_solution_scores, grade_known_wrong

L = "10_mixture_of_experts"
CORRECTNESS = {"answers_moe": 2, "routing_correct": 4, "grouped_matmul_correct": 4, "moe_forward_correct": 4,
               "grouped_backward_correct": 3, "grouped_function_correct": 2}
SPEED = {"grouped_matmul_speed"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_known_wrong(tmp_path_factory, L, {
        "wrong": ("ties_to_last", "inclusive_offsets", "dw_last_block")})  # one student, three cells: a shorter suite


def _lost(scores, student):
    return differs(scores["solution"], scores[student])


def test_solution_gets_every_correctness_point_and_no_speed_on_cpu(graded):
    course, grades, scores = graded
    assert_solution_scores(course, grades, scores, L, CORRECTNESS, SPEED)


def test_blank_release_scores_zero(graded):
    course, _, scores = graded
    assert_blank_scores_zero(course, scores, L, ("grouped_matmul_correct", "routing_correct"))


def test_wrong_routing_and_dw_lose_exactly_the_problems_built_on_them(graded):
    # the offsets feed the MoE forward's permutation too; the grouped GEMM takes its offsets as given; dW of the
    # last row block only is wrong wherever an expert has more rows than one block (backward and Function)
    course, _, scores = graded
    assert _lost(scores, "wrong") == {"routing_correct", "moe_forward_correct", "grouped_backward_correct",
                                      "grouped_function_correct"}
    assert "offsets" in course.result(L, "wrong", "routing_correct")["why"]


def test_feedback_and_export_cover_every_student(graded):
    assert_feedback_and_export_cover(*graded, L)
