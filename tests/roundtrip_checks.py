"""What every lesson's round trip starts from and asserts about the solution and the blank release."""
from kernellab.grading.instructor import submissions as S
from kernellab.grading.instructor.dryrun import Course


def new_course(tmp_path_factory, lesson: str):
    """A fresh course folder with ``lesson`` generated: (course, release nb, source nb, known-wrong edits)."""
    course = Course(tmp_path_factory.mktemp(f"course-{lesson[:2]}"))
    course.generate(lesson)
    rel, src = course.release_nb(lesson), course.source_nb(lesson)
    return course, rel, src, S.known_wrong(lesson, src)


def grade_known_wrong(tmp_path_factory, lesson: str, students: dict) -> tuple:
    """A fresh course through nbgrader's round trip: the solution, the blank release, and each of ``students``
    (name -> the known-wrong edits it carries, each in its own cell). Returns (course, grades, scores)."""
    course, rel, src, wrong = new_course(tmp_path_factory, lesson)
    subs = {"solution": S.filled(rel, src), "blank": rel}
    subs |= {name: S.filled(rel, src, combine(*(wrong[b] for b in bugs))) for name, bugs in students.items()}
    grades, scores = course.round_trip(lesson, subs)
    return course, grades, scores


def combine(*overrides) -> dict:
    """Several known bugs in one submission (each in its own cell), to keep the CPU suite short."""
    out = {}
    for o in overrides:
        assert not set(o) & set(out), "combined bugs must edit different cells"
        out.update(o)
    return out


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


def assert_feedback_and_export_cover(course, grades, scores, lesson):
    """Every graded student got a feedback page and a row in the exported grades."""
    assert scores
    for student in scores:
        assert (course.ag / "feedback" / student / lesson / f"{lesson}.html").exists(), student
        assert student in grades, student
