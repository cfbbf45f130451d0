"""Where the course lives on disk, and the environment its tool subprocesses (nbgrader) run in."""
from __future__ import annotations

import os
import pathlib
import sys


def repo_root() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parents[2]


def package_root() -> pathlib.Path:
    """The folder holding ``kernellab`` (autograder/ in a checkout)."""
    return pathlib.Path(__file__).resolve().parents[1]


def pythonpath_with_package(pythonpath: str | None) -> str:
    """``pythonpath`` with this kernellab's folder first: a process started with it imports this checkout's."""
    return os.pathsep.join(p for p in (str(package_root()), pythonpath or "") if p)


def tool_env() -> dict:
    """Environment for nbgrader subprocesses: this Python's scripts folder on PATH (nbgrader calls
    the ``alembic`` executable) and this checkout's kernellab importable (a course copy has none)."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = pythonpath_with_package(env.get("PYTHONPATH"))
    return env


# Importing nbformat imports jsonschema, which compiles an IRI grammar (the rfc3987_syntax package: 1.5-1.9 s on a
# 2-core machine) for a string format that no notebook schema uses. The nbgrader processes the course starts skip it:
# with None in sys.modules that import fails, and jsonschema goes on without that one format checker.
SKIP_IRI_GRAMMAR = "import sys; sys.modules.setdefault('rfc3987_syntax', None)"


def nbformat_python(code: str, *args: str) -> list[str]:
    """A command line for subprocess: this Python running ``code`` with ``args``, the IRI grammar skipped (for
    code that imports nbformat, as nbgrader does: see SKIP_IRI_GRAMMAR)."""
    return [sys.executable, "-c", f"{SKIP_IRI_GRAMMAR}\n{code}", *args]


def nbgrader_command(*args: str) -> list[str]:
    """``nbgrader ARGS`` as a command line for subprocess (nbformat_python)."""
    return nbformat_python("from nbgrader.apps.nbgraderapp import main\nmain()", *args)
