"""A course notebook as code: run its cells. Which cells a problem needs is read by ``notebook_source`` (nothing
there executes a cell; the judge side reads notebooks through it alone).

The grading worker runs the cells ``notebook_source.sources_for`` picks in a namespace like the setup cell's
(``new_namespace``, ``exec_cells``); the benchmark runs the solution's cells the same way (load_solution), and the
GPU report and the agreement check run whole notebooks (execute_notebook).
"""
from __future__ import annotations

import itertools
import json
import os
import pathlib
import time

from .notebook_source import _PRELUDE, grade_id, read_notebook, sources_for
from .paths import repo_root


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
