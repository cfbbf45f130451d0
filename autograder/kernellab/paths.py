"""Where the course lives on disk, and the environment its tool subprocesses (nbgrader) run in."""
from __future__ import annotations

import os
import pathlib
import sys


def repo_root() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parents[2]


def tool_env() -> dict:
    """Environment for nbgrader subprocesses: this Python's scripts folder on PATH (nbgrader calls
    the ``alembic`` executable) and this checkout's kernellab importable (a course copy has none)."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(repo_root() / "autograder") + os.pathsep + env.get("PYTHONPATH", "")
    return env
