"""Lesson 04 through the instructor's round trip (nbgrader generate, autograde, feedback, export): the
solution, the blank release, and the classic FlashAttention bugs, each losing exactly what it breaks."""
import pytest

from kernellab.grading.instructor.dryrun import differs
from roundtrip_checks import assert_blank_scores_zero, assert_feedback_and_export_cover, assert_solution_scores, grade_known_wrong

L = "04_flash_attention"
CORRECTNESS = {"answers_memory": 2, "flash_attention_correct": 5, "flash_attention_memory": 2}
SPEED = {"flash_speed_naive", "flash_speed_sdpa"}
BUGS = ("no_rescaling", "causal_off_by_one", "missing_tail_mask")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_known_wrong(tmp_path_factory, L, {b: (b,) for b in BUGS})


def test_solution_gets_every_correctness_point_and_no_speed_on_cpu(graded):
    course, grades, scores = graded
    assert_solution_scores(course, grades, scores, L, CORRECTNESS, SPEED)


def test_blank_release_scores_zero(graded):
    course, _, scores = graded
    assert_blank_scores_zero(course, scores, L, ("flash_attention_correct", "flash_attention_memory"))


BOTH = {"flash_attention_correct", "flash_attention_memory"}


@pytest.mark.parametrize("bug, lost, hint", [
    ("no_rescaling", BOTH, "rescale the accumulator and the running sum"),
    ("causal_off_by_one", BOTH, "It is wrong only when causal"),
    # the memory check's odd length is causal, where the diagonal mask also hides keys >= N
    ("missing_tail_mask", {"flash_attention_correct"}, "It is wrong only when N is not a multiple of the block"),
])
def test_each_bug_loses_the_kernel_points_and_names_the_mistake(graded, bug, lost, hint):
    course, _, scores = graded
    # a wrong kernel is wrong on the memory check's cases too (they are checked for correctness first)
    assert differs(scores["solution"], scores[bug]) == lost
    assert hint in course.result(L, bug, "flash_attention_correct")["why"]


def test_feedback_and_export_cover_every_student(graded):
    assert_feedback_and_export_cover(*graded, L)
