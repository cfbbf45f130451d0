"""Build the student notebooks (notebooks/) from the solutions (solutions/) with nbgrader."""
from __future__ import annotations

import json
import pathlib
import subprocess

from .lessons import LESSONS
from .paths import nbformat_python, repo_root, tool_env


def strip_outputs(path: pathlib.Path) -> bool:
    """Remove outputs and execution counts in place; True if the file changed."""
    nb = json.loads(path.read_text())
    changed = False
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            if cell.get("outputs") or cell.get("execution_count") is not None:
                changed = True
            cell["outputs"], cell["execution_count"] = [], None
    if changed:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return changed


# One nbgrader process for every lesson (its start is 3.5 s on a 2-core machine; a process per lesson paid it
# eight times), through nbgrader's own API with the course's nbgrader_config.py.
_GENERATE = """
import sys
from traitlets.config.loader import PyFileConfigLoader
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
config = PyFileConfigLoader("nbgrader_config.py", path=".").load_config()
api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
failed = 0
for lesson in sys.argv[1:]:
    r = api.generate_assignment(lesson, force=True, create=True)
    if not r["success"]:
        print(f"nbgrader generate_assignment {lesson} failed:", r.get("error", ""), r.get("log", ""), file=sys.stderr)
        failed = 1
sys.exit(failed)
"""


def generate(root: pathlib.Path, lessons=None) -> list[pathlib.Path]:
    """``nbgrader generate_assignment`` for each lesson of a course rooted at ``root``, outputs stripped."""
    lessons = list(lessons or LESSONS)
    r = subprocess.run(nbformat_python(_GENERATE, *lessons), cwd=root / "autograder", capture_output=True, text=True,
                       env=tool_env())
    if r.returncode != 0:
        raise RuntimeError(f"generating the notebooks failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    out = []
    for lid in lessons:
        nb = root / "notebooks" / lid / f"{lid}.ipynb"
        strip_outputs(nb)
        out.append(nb)
    return out


def build(lessons=None) -> list[pathlib.Path]:
    """Regenerate notebooks/ in this checkout."""
    paths = generate(repo_root(), lessons)
    for p in paths:
        print(f"wrote {p.relative_to(repo_root())}")
    return paths


def generate_fresh(lessons=None) -> pathlib.Path:
    """Generate into a throw-away copy of the course (for the staleness test); returns its root."""
    from .grading.instructor.dryrun import Course
    course = Course()
    generate(course.root, lessons)
    return course.root
