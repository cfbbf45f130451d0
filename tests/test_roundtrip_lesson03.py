"""Lesson 03 through the instructor's round trip (nbgrader generate, autograde, feedback, export): the
solution, the blank release, and wrong submissions that must lose exactly what they break."""
import pytest

from kernellab.grading.instructor.dryrun import differs
from roundtrip_checks import assert_blank_scores_zero, assert_feedback_and_export_cover, assert_solution_scores, grade_known_wrong

L = "03_fused_softmax_layernorm"
CORRECTNESS = {"answers_traffic": 2, "softmax_correct": 4, "online_softmax_correct": 3, "online_softmax_reads": 2,
               "add_layernorm_correct": 4}
SPEED = {"softmax_speed", "softmax_fusion_speed", "add_layernorm_speed"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_known_wrong(tmp_path_factory, L, {
        "three_bugs": ("no_max_subtraction", "unbiased_variance", "three_pass_online"),
        "unmasked": ("unmasked_tail",)})


def test_solution_gets_every_correctness_point_and_no_speed_on_cpu(graded):
    course, grades, scores = graded
    assert_solution_scores(course, grades, scores, L, CORRECTNESS, SPEED)
    assert "2.00 reads per input element" in course.result(L, "solution", "online_softmax_reads")["why"]


def test_blank_release_scores_zero(graded):
    course, _, scores = graded
    assert_blank_scores_zero(course, scores, L, ("softmax_correct", "add_layernorm_correct"))


def test_each_bug_loses_only_its_own_problem_and_says_why(graded):
    course, _, scores = graded
    assert differs(scores["solution"], scores["three_bugs"]) == {
        "softmax_correct", "add_layernorm_correct", "online_softmax_reads"}
    assert "Subtract the row's max" in course.result(L, "three_bugs", "softmax_correct")["why"]
    assert "unbiased variance" in course.result(L, "three_bugs", "add_layernorm_correct")["why"]
    assert "3.00 per element" in course.result(L, "three_bugs", "online_softmax_reads")["why"]


def test_unmasked_tail_loses_the_softmax_with_a_mask_hint(graded):
    course, _, scores = graded
    assert differs(scores["solution"], scores["unmasked"]) == {"softmax_correct"}
    assert "wrote past the end" in course.result(L, "unmasked", "softmax_correct")["why"]


def test_feedback_and_export_cover_every_student(graded):
    assert_feedback_and_export_cover(*graded, L)
