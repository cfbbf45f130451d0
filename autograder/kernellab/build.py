"""Build the student notebooks (notebooks/) from the solutions (solutions/) with nbgrader."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from .lessons import LESSONS
from .paths import repo_root, tool_env


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


def generate(root: pathlib.Path, lessons=None, quiet: bool = True) -> list[pathlib.Path]:
    """Run ``nbgrader generate_assignment`` for each lesson of a course rooted at ``root``."""
    out = []
    for lid in lessons or LESSONS:
        cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", lid, "--force", "--log-level=ERROR"]
        r = subprocess.run(cmd, cwd=root / "autograder", capture_output=True, text=True, env=tool_env())
        if r.returncode != 0:
            raise RuntimeError(f"nbgrader generate_assignment {lid} failed:\n{r.stdout}\n{r.stderr}")
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
    from .grading.dryrun import Course
    course = Course()
    generate(course.root, lessons)
    return course.root
