"""A course notebook as code: read it, find the cells that define some names, run them.

For one problem the grading child process runs only the cells that define the problem's names, plus
the earlier cells those depend on: a crash at the top of an unrelated cell cannot cost this
problem. Cells are found by nbgrader metadata; if that was stripped, by what they define.
The benchmark runs the solution's cells the same way (load_solution), and the GPU report and the
agreement check run whole notebooks (execute_notebook).
"""
from __future__ import annotations

import ast
import itertools
import json
import os
import pathlib
import time

from .compat import parse_python
from .paths import repo_root


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


def new_namespace(lesson: str | None = None) -> dict:
    """A fresh namespace with what the setup cell defines (``L`` is the lesson's module, as the setup cell
    imports it)."""
    ns = {"__name__": "__submission__"}
    exec(_PRELUDE, ns)
    if lesson:
        from .lessons import lesson_module
        ns["L"] = lesson_module(lesson)
    return ns


_EXECUTIONS = itertools.count(1)


def exec_cells(sources: list, ns: dict, tag: str = "cell") -> None:
    """Execute cell sources in ``ns`` the way IPython does: each registered in linecache first,
    because Triton's @jit reads a kernel's source text (it refuses functions without one)."""
    import linecache
    for k, src in enumerate(sources):
        # A name no other execution shares: the interpreter re-reads a kernel's source by this name when it
        # first runs it, and must not find a later variant's cell there.
        name = f"<kernellab-{tag}-{k + 1}-{next(_EXECUTIONS)}>"
        linecache.cache[name] = (len(src), None, src.splitlines(keepends=True), name)
        exec(compile(src, name, "exec"), ns)


def read_notebook(path):
    import nbformat  # here, not at the top: the grading child imports this module, and nbformat's schema
    return nbformat.read(str(path), as_version=4)  # validator costs it about 1.5 s of start-up


def load_solution(lesson: str, names: tuple, overrides: dict | None = None, edit=None, tag: str = "solution") -> dict:
    """Execute the solution cells that define ``names`` (from solutions/); ``overrides`` (grade_id ->
    source) replaces some cells, and ``edit`` (source -> source) rewrites every cell, to run a variant of the
    solution (``tag`` names its cells' sources apart)."""
    nb = read_notebook(repo_root() / "solutions" / lesson / f"{lesson}.ipynb")
    for c in nb.cells:
        if grade_id(c) in (overrides or {}):
            c.source = overrides[grade_id(c)]
        if edit is not None:
            c.source = edit(c.source)
    sources, missing = sources_for(nb, names)
    if missing:
        raise RuntimeError(missing)
    ns = new_namespace(lesson)
    exec_cells(sources, ns, tag=f"{lesson}-{tag}")
    return ns


# Appended to a notebook run by execute_notebook: prints what every check said (learner.VERDICTS).
_VERDICT_MARK = "KERNELLAB-VERDICTS "
_VERDICT_CELL = ("import json as _json, kernellab.learner as _kl_learner\n"
                 f"print({_VERDICT_MARK!r} + _json.dumps(_kl_learner.VERDICTS, default=float))")


def execute_notebook(path: pathlib.Path) -> dict:
    """Run a notebook top to bottom as a learner would; returns its wall time, the errors, what each
    check cell printed and what each check decided (``verdicts``, from kernellab.learner)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(_VERDICT_CELL))
    t0 = time.monotonic()
    # Headless, so widgets draw a static picture: a widget cell can hang nbclient (nbclient#312).
    NotebookClient(nb, timeout=900, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute(
        env={**os.environ, "KERNELLAB_STATIC_WIDGETS": "1"})
    wall = time.monotonic() - t0
    errors, outputs, verdicts = [], [], {}
    for c in nb.cells:
        gid = grade_id(c)
        for o in c.get("outputs", []):
            if o.output_type == "error":
                errors.append(f"{gid}: {o.ename}: {o.evalue[:300]}")
            elif o.output_type == "stream" and o.text.startswith(_VERDICT_MARK):
                verdicts = json.loads(o.text[len(_VERDICT_MARK):])
            elif o.output_type == "stream" and gid:
                outputs.append(f"{gid}: {o.text.strip()[:400]}")
    return {"wall_s": wall, "errors": errors, "outputs": outputs, "verdicts": verdicts}
