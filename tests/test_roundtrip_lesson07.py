"""Lesson 07 through the instructor's round trip (nbgrader generate, autograde, feedback, export): the solution,
the blank release, a two-stage reduction that sums one program's partials, the library's attention inside a custom
op behind a token launch, and torch.compile of the eager block inside block_forward."""
import pytest

from kernellab.grading.instructor.dryrun import differs
from roundtrip_checks import assert_blank_scores_zero, assert_feedback_and_export_cover, assert_solution_scores, grade_known_wrong

L = "07_ship_it"
CORRECTNESS = {"ln_backward_correct": 4, "compiled_block_correct": 5}
GPU_ONLY = {"ln_backward_speed", "step_speed_sdpa", "step_speed_compile"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_known_wrong(tmp_path_factory, L, {
        "partials_and_compile": ("partials_of_one_program", "compile_in_block"), "sdpa_in_op": ("sdpa_in_op",)})


def test_solution_gets_every_correctness_point_and_gpu_items_say_gpu_only(graded):
    course, grades, scores = graded
    assert_solution_scores(course, grades, scores, L, CORRECTNESS, GPU_ONLY)


def test_blank_release_scores_zero(graded):
    course, _, scores = graded
    assert_blank_scores_zero(course, scores, L, ("ln_backward_correct",))


def test_one_programs_partials_and_torch_compile_in_block_forward_cost_what_they_break(graded):
    # two bugs in two cells, one student (the CPU suite's time): the backward sums one program's partials, and
    # block_forward calls torch.compile of the eager block with SDPA (refused by the code rules)
    course, _, scores = graded
    assert differs(scores["solution"], scores["partials_and_compile"]) == {"ln_backward_correct",
                                                                           "compiled_block_correct"}
    why = course.result(L, "partials_and_compile", "ln_backward_correct")["why"]
    assert "dweight" in why and "partial sums of every program" in why
    assert "torch.compile" in course.result(L, "partials_and_compile", "compiled_block_correct")["why"]


def test_sdpa_behind_a_token_launch_inside_a_custom_op_is_named(graded):
    course, _, scores = graded
    assert differs(scores["solution"], scores["sdpa_in_op"]) == {"compiled_block_correct"}
    why = course.result(L, "sdpa_in_op", "compiled_block_correct")["why"]
    assert "scaled_dot_product" in why and "custom ops" in why


def test_feedback_and_export_cover_every_student(graded):
    assert_feedback_and_export_cover(*graded, L)
