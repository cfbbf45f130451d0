"""A course notebook as text: which cells are the learner's, which define a problem's names, what a cell's nbgrader
metadata says. Nothing here executes a cell: the grading process and the judge side read notebooks through this
module only (tests/test_architecture.py), and ``notebook_cells`` runs them.

For one problem the grading worker runs only the cells that define the problem's names, plus the earlier cells
those depend on: a crash at the top of an unrelated cell cannot cost this problem. Cells are found by nbgrader
metadata; if that was stripped, by what they define.
"""
from __future__ import annotations

import ast

from .compat import parse_python


def to_python(source: str) -> str:
    """IPython syntax (%magics, !shell) as plain Python that the child can compile."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - IPython missing: drop magic lines
        return "\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!")))


def _meta(cell) -> dict:
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def grade_id(cell) -> str | None:
    """The nbgrader grade_id of a cell (any kind), or None."""
    return _meta(cell).get("grade_id")


def graded_test_id(cell) -> str | None:
    """The grade_id of an autograded test cell, or None for every other cell."""
    return grade_id(cell) if _is_test(cell) else None


def _is_test(cell) -> bool:
    m = _meta(cell)
    return bool(m.get("grade")) and not m.get("solution")


def _names(tree) -> tuple[set, set]:
    """(names a cell defines at top level, names it reads anywhere)."""
    defined, used = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                # a, (b, *c) = ... binds names; torch.x = ... or d[k] = ... changes an object, binding nothing
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        defined.add(n.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                name = (a.asname or a.name).split(".")[0]
                if name not in _PRELUDE_NAMES:  # re-importing torch does not make a cell torch's provider
                    defined.add(name)
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            used.add(n.id)
    return defined, used


def candidate_cells(nb) -> list[tuple[int, str]]:
    """(index, python source) of the cells the learner writes: solution cells, else non-test code."""
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    sol = [(i, to_python(c.source)) for i, c in code if _meta(c).get("solution")]
    others = [(i, to_python(c.source)) for i, c in code if not _meta(c) and not _is_test(c)]
    return sol, others


def sources_for(nb, names: tuple) -> tuple[list[str], str | None]:
    """The sources to run for a problem needing ``names``, or an explanation of what is missing."""
    sol, others = candidate_cells(nb)
    parsed = []
    for pool in (sol, others):
        for i, src in pool:
            try:
                parsed.append((i, src, *_names(parse_python(src))))
            except SyntaxError as exc:
                parsed.append((i, src, set(), set(), exc))
                continue
    parsed = [p if len(p) == 5 else (*p, None) for p in parsed]
    parsed.sort(key=lambda p: p[0])
    chosen, need = [], set(names)
    # Walk backwards: a cell is needed if it defines something still needed.
    for i, src, defined, used, err in reversed(parsed):
        if err is not None and any(n in src for n in need):
            return [], f"Your cell defining {', '.join(names)} has a syntax error: {err.msg} (line {err.lineno})."
        if err is None and defined & need:
            chosen.append(src)
            need = (need - defined) | (used - defined)
    missing = [n for n in names if not any(n in p[2] for p in parsed)]
    if missing:
        return [], (f"The notebook does not define {', '.join(missing)}: the exercise cell is missing or was "
                    "renamed.")
    return list(reversed(chosen)), None


# What the lesson's setup cell provides, so cells taken out of a notebook run on their own.
# get_ipython() answers every magic with a no-op (to_python turns %magics into its calls).
_PRELUDE = """
import math
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import kernellab as kl

class _NoIPython:
    def __getattr__(self, name):
        return lambda *args, **kwargs: None

def get_ipython():
    return _NoIPython()
"""
# The modules the prelude binds for every problem (math, torch, F, triton, tl, kl).
_PRELUDE_NAMES = {(a.asname or a.name).split(".")[0] for node in ast.parse(_PRELUDE).body
                  if isinstance(node, ast.Import) for a in node.names}


def read_notebook(path):
    import nbformat  # here, not at the top: the grading child imports this module, and nbformat's schema
    return nbformat.read(str(path), as_version=4)  # validator costs it about 1.5 s of start-up
