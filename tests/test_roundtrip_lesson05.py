"""Lesson 05 through the instructor's round trip: the solution, the blank release, dK without the scale
(with a forward that returns the lse through autograd, in another cell) and a causal mask off by one."""
import pytest

from kernellab.grading.instructor.dryrun import differs
from roundtrip_checks import assert_blank_scores_zero, assert_feedback_and_export_cover, assert_solution_scores, grade_known_wrong

L = "05_flash_attention_backward"
CORRECTNESS = {"answers_backward": 2, "flash_backward_correct": 5, "attention_function_correct": 3}
SPEED = {"flash_backward_speed"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_known_wrong(tmp_path_factory, L, {
        "unscaled_dk_and_tuple": ("dk_without_scale", "forward_returns_lse"), "causal_off_by_one": ("causal_off_by_one",)})


def test_solution_gets_every_correctness_point_and_no_speed_on_cpu(graded):
    course, grades, scores = graded
    assert_solution_scores(course, grades, scores, L, CORRECTNESS, SPEED)


def test_blank_release_scores_zero(graded):
    course, _, scores = graded
    assert_blank_scores_zero(course, scores, L, ("flash_backward_correct",))


def test_unscaled_dk_is_named_and_a_tuple_from_forward_is_refused(graded):
    course, _, scores = graded
    assert differs(scores["solution"], scores["unscaled_dk_and_tuple"]) == {
        "flash_backward_correct", "attention_function_correct"}
    assert "dK is off by exactly sqrt(D)" in course.result(L, "unscaled_dk_and_tuple", "flash_backward_correct")["why"]


def test_causal_off_by_one_loses_the_backward_and_the_function(graded):
    course, _, scores = graded
    assert differs(scores["solution"], scores["causal_off_by_one"]) == {
        "flash_backward_correct", "attention_function_correct"}
    assert "It is wrong only when causal" in course.result(L, "causal_off_by_one", "flash_backward_correct")["why"]


def test_feedback_and_export_cover_every_student(graded):
    assert_feedback_and_export_cover(*graded, L)
