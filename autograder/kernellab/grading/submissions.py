"""Make submissions for dry runs and tests: the release notebook with the learner's cells filled in."""
from __future__ import annotations

import copy
import re

import nbformat

_SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION\n(.*?)^[ \t]*### END SOLUTION\n?", re.S | re.M)


def _gid(cell):
    return ((cell.get("metadata") or {}).get("nbgrader") or {}).get("grade_id")


def solution_text(source: str) -> str:
    """The source with the solution markers removed (what a learner who solved it would have)."""
    return _SOLUTION.sub(lambda m: m.group(1), source)


def filled(release_nb, source_nb, overrides: dict | None = None, drop: tuple = ()):
    """A release notebook whose solution cells hold the reference solution, except ``overrides``
    (grade_id -> new source); cells whose grade_id is in ``drop`` are deleted."""
    nb = copy.deepcopy(release_nb)
    solutions = {_gid(c): solution_text(c.source) for c in source_nb.cells
                 if ((c.get("metadata") or {}).get("nbgrader") or {}).get("solution")}
    overrides = overrides or {}
    cells = []
    for c in nb.cells:
        gid = _gid(c)
        if gid in drop:
            continue
        if gid in overrides:
            c.source = overrides[gid]
        elif gid in solutions:
            c.source = solutions[gid]
        cells.append(c)
    nb.cells = cells
    return nb


def read(path):
    return nbformat.read(str(path), as_version=4)


def write(nb, path):
    nbformat.write(nb, str(path))
