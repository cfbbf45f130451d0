"""What every lesson's round trip starts from and asserts about the solution and the blank release."""
import pathlib
import shutil
from unittest import mock

from kernellab.grading.instructor import submissions as S
from kernellab.grading.instructor.dryrun import Course

_EMPTY_GRADEBOOK = {}  # this test process's empty gradebook, made once (empty_gradebook)


def empty_gradebook(tmp_path_factory) -> pathlib.Path:
    """An empty gradebook of the course ("kernellab"), made once per test process by nbgrader's own Gradebook, as
    ``generate_assignment`` makes one in a fresh course. nbgrader stamps a new gradebook with the head revision of
    its alembic scripts by running ``alembic heads`` in a process of its own, which imports nbgrader and jsonschema's
    IRI grammar again: 5.5-6 s on a 2-core machine, paid by every fresh course. Here the same head is read from
    the same scripts with alembic's own ScriptDirectory, in this process (0.2 s). A course gets a copy of the file:
    nbgrader finds it there, adds the lesson's assignment, and goes on as in a fresh course."""
    if "path" not in _EMPTY_GRADEBOOK:
        import nbgrader.api as api
        from alembic.script import ScriptDirectory
        heads = ScriptDirectory(str(pathlib.Path(api.__file__).parent / "alembic")).get_heads()
        assert len(heads) == 1, heads  # what `alembic heads` prints first, and nbgrader takes
        db = tmp_path_factory.mktemp("empty-gradebook") / "gradebook.db"
        with mock.patch.object(api, "get_alembic_version", lambda: heads[0]):
            api.Gradebook(f"sqlite:///{db}", "kernellab").close()
        _EMPTY_GRADEBOOK["path"] = db
    return _EMPTY_GRADEBOOK["path"]


def new_course(tmp_path_factory, lesson: str, fresh_gradebook: bool = False):
    """A fresh course folder with ``lesson`` generated: (course, release nb, source nb, known-wrong edits).
    Its gradebook starts as a copy of ``empty_gradebook``; with ``fresh_gradebook`` nbgrader makes it itself in
    ``generate_assignment`` (alembic found on tool_env's PATH), as in an instructor's first course (test_roundtrip)."""
    course = Course(tmp_path_factory.mktemp(f"course-{lesson[:2]}"))
    if not fresh_gradebook:
        shutil.copy(empty_gradebook(tmp_path_factory), course.ag / "gradebook.db")
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
