"""What every lesson's round trip asserts about the solution and the blank release."""


def assert_solution_scores(course, grades, scores, lesson, correctness: dict, speed: set):
    """Every correctness point, and speed problems at 0 with the no-GPU reason (CI has no GPU)."""
    for gid, pts in correctness.items():
        assert scores["solution"][gid] == pts, (gid, course.result(lesson, "solution", gid)["why"])
    for gid in speed:
        assert scores["solution"][gid] == 0
        assert "only graded on a GPU" in course.result(lesson, "solution", gid)["why"]
    assert grades["solution"][lesson] == sum(correctness.values())


def assert_blank_scores_zero(course, scores, lesson, said_not_written: tuple):
    assert all(v == 0 for v in scores["blank"].values())
    for gid in said_not_written:
        assert "not written yet" in course.result(lesson, "blank", gid)["why"]
