"""Lesson 02 through the instructor's round trip (nbgrader generate, autograde, feedback, export):
the solution, the blank release, and wrong submissions that must lose exactly what they break."""
import pytest

from kernellab.grading.instructor.dryrun import differs
from roundtrip_checks import assert_blank_scores_zero, assert_feedback_and_export_cover, assert_solution_scores, grade_known_wrong

L = "02_tiled_matmul"
CORRECTNESS = {"answers_reuse": 2, "tile_mapping": 2, "matmul_correct": 4, "epilogue_correct": 3}
SPEED = {"matmul_speed", "epilogue_speed"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_known_wrong(tmp_path_factory, L, {
        "nomask": ("no_tail_mask",), "strides_rowmajor": ("wrong_strides", "row_major_order"),
        "fp16acc": ("fp16_accumulation",), "nobias": ("epilogue_without_bias",)})


def _lost(scores, student):
    return differs(scores["solution"], scores[student])


def test_solution_gets_every_correctness_point_and_no_speed_on_cpu(graded):
    course, grades, scores = graded
    assert_solution_scores(course, grades, scores, L, CORRECTNESS, SPEED)


def test_blank_release_scores_zero(graded):
    course, _, scores = graded
    assert_blank_scores_zero(course, scores, L, ("matmul_correct", "tile_mapping"))


def test_unmasked_tails_lose_the_kernel_problems_with_a_mask_hint(graded):
    course, _, scores = graded
    assert _lost(scores, "nomask") == {"matmul_correct", "epilogue_correct"}
    assert "mask" in course.result(L, "nomask", "matmul_correct")["why"].lower()


def test_wrong_strides_and_row_major_order_each_say_so(graded):
    course, _, scores = graded
    assert _lost(scores, "strides_rowmajor") == {"matmul_correct", "epilogue_correct", "tile_mapping"}
    why = course.result(L, "strides_rowmajor", "matmul_correct")["why"]
    assert "transposed" in why and "stride" in why, why
    assert "row-major order" in course.result(L, "strides_rowmajor", "tile_mapping")["why"]


def test_fp16_accumulation_loses_only_matmul_and_names_the_accumulator(graded):
    course, _, scores = graded
    assert _lost(scores, "fp16acc") == {"matmul_correct"}
    why = course.result(L, "fp16acc", "matmul_correct")["why"]
    assert "long-K" in why and "float32" in why, why


def test_missing_bias_loses_only_the_epilogue(graded):
    _, _, scores = graded
    assert _lost(scores, "nobias") == {"epilogue_correct"}


def test_feedback_and_export_cover_every_student(graded):
    assert_feedback_and_export_cover(*graded, L)
