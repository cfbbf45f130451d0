"""The result store: each problem's grade of record kept as JSON, so a class is graded once.

A result is keyed by (lesson, student, the submitted notebook's content hash, a fingerprint of the course
secret, the machine's device, problem id, and a hash of the grading code itself). The content hash covers each code cell's source and the nbgrader
fields the harness reads to pick cells (grade_id, solution, grade); never outputs, execution counts or other
metadata, so rerunning a notebook does not change it. The secret fingerprint is a hash of the secret (the secret
itself is never written): a new secret means new seeds, so nothing stored under the old one is reused.
Writes are atomic (a temp file in the same folder, then ``os.replace``), so an interrupted run leaves only
whole entries, and the next run resumes from them.

Layout: ``<root>/<lesson>/<student>/<problem>/<key>.json`` (``kernellab term autograde`` uses
``autograder/grading_store/``).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import re
import tempfile

STORE_DIR = "grading_store"


def notebook_hash(nb) -> str:
    """sha256 over the code cells: source plus nbgrader grade_id/solution/grade (what grading reads)."""
    h = hashlib.sha256(b"kernellab-nb-v1")
    for c in nb.cells:
        if c.get("cell_type") != "code":
            continue
        meta = (c.get("metadata") or {}).get("nbgrader") or {}
        src = c.get("source", "")
        src = "".join(src) if isinstance(src, list) else str(src)
        part = [meta.get("grade_id"), bool(meta.get("solution")), bool(meta.get("grade")), src]
        h.update(json.dumps(part).encode())
        h.update(b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def grader_version() -> str:
    """A hash of the grading code itself (every module of the kernellab package): a result graded by other code
    (a fixed check, a changed band) is graded again instead of reused."""
    h = hashlib.sha256(b"kernellab-grader-v1")
    root = pathlib.Path(__file__).resolve().parents[1]
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def secret_fingerprint(secret: bytes) -> str:
    """A one-way fingerprint of the course secret (never the secret)."""
    return hashlib.sha256(b"kernellab-store-secret|" + bytes(secret)).hexdigest()[:24]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))[:80] or "_"


class Store:
    def __init__(self, root):
        self.root = pathlib.Path(root)

    @staticmethod
    def key(lesson: str, student: str, nb_hash: str, secret_fp: str, problem: str, device: str = "") -> dict:
        return {"lesson": lesson, "student": student, "notebook": nb_hash, "secret": secret_fp,
                "device": device, "problem": problem, "grader": grader_version()}

    def path(self, key: dict) -> pathlib.Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
        return self.root / _safe(key["lesson"]) / _safe(key["student"]) / _safe(key["problem"]) / f"{digest}.json"

    def get(self, key: dict) -> dict | None:
        """The stored entry for ``key``, or None (missing, unreadable, or stored under another key)."""
        try:
            entry = json.loads(self.path(key).read_text())
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and entry.get("key") == key else None

    def put(self, key: dict, entry: dict) -> pathlib.Path:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({**entry, "key": key}, f, indent=1)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path

    def entries(self, lesson: str | None = None) -> list[dict]:
        pattern = f"{_safe(lesson)}/*/*/*.json" if lesson else "*/*/*/*.json"
        out = []
        for p in sorted(self.root.glob(pattern)):
            try:
                out.append(json.loads(p.read_text()))
            except (OSError, ValueError):
                continue
        return out
