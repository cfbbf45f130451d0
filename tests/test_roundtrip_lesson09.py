"""Lesson 09 through the instructor's round trip (nbgrader generate, autograde, feedback, export): the solution, the
blank release, and one student with two classic bugs in different cells, losing exactly what they break (one
course for the file, three autogrades)."""
import pytest

from kernellab.grading.instructor.dryrun import differs
from roundtrip_checks import assert_blank_scores_zero, assert_feedback_and_export_cover, assert_solution_scores, grade_known_wrong

L = "09_serve_it"
CORRECTNESS = {"answers_decode": 2, "merge_correct": 3, "decode_attention_correct": 5, "decode_long_correct": 2,
               "gqa_reads": 2, "paged_decode_correct": 4}
SPEED = {"decode_bandwidth", "decode_speed_sdpa"}
# the merge's overflow and interleaved GQA heads, in their two cells; tail masks and the block table are unit tests
STUDENTS = {"two_bugs": ("merge_without_max", "gqa_interleaved")}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_known_wrong(tmp_path_factory, L, STUDENTS)


def test_solution_gets_every_correctness_point_and_no_speed_on_cpu(graded):
    course, grades, scores = graded
    assert_solution_scores(course, grades, scores, L, CORRECTNESS, SPEED)


def test_blank_release_scores_zero(graded):
    course, _, scores = graded
    assert_blank_scores_zero(course, scores, L, ("merge_correct", "decode_attention_correct", "paged_decode_correct"))


def test_the_bugs_lose_what_they_break_and_name_the_mistakes(graded):
    course, _, scores = graded
    # the merge's overflow needs lse far apart, which a decode's scores never are: of the merge's users only the
    # merge problem loses; interleaved heads break every problem with grouped heads
    assert differs(scores["solution"], scores["two_bugs"]) == {
        "merge_correct", "decode_attention_correct", "decode_long_correct", "gqa_reads", "paged_decode_correct"}
    assert "far apart" in course.result(L, "two_bugs", "merge_correct")["why"]
    assert "hq // (HQ // HKV)" in course.result(L, "two_bugs", "decode_attention_correct")["why"]


def test_feedback_and_export_cover_every_student(graded):
    assert_feedback_and_export_cover(*graded, L)
