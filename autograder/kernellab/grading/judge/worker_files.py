"""The grading process's side of a worker's folder: every file in it may have been put there by learner code.

A confined worker (grading/processes/sandbox.py) may still create, delete and replace anything in its own job folder, and
the grading process reads that folder once the worker has ended. So it never follows a link there (a red-team
worker, 2026-11-27, replaced its log by a link to the course secret, which the grading process then copied into
the grading record), never opens anything but a regular file (a named pipe in the log's place hung the whole
grading on its read), reads at most a bounded size, copies only regular files out of it (a link to /dev/zero
among the kernel files would have been copied without end), and writes its answers only as files it creates
itself (a link planted under an answer's name would have had the grading process write through it).
"""
from __future__ import annotations

import io
import os
import pathlib
import stat

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class NotAWorkerFile(OSError):
    """A path in a worker's folder that is not a plain file the grading process may read."""


def _open_regular(path) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(path, _READ)
    except OSError as exc:  # ELOOP: a link in its place
        raise NotAWorkerFile(f"{os.path.basename(path)}: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotAWorkerFile(f"{os.path.basename(path)} is not a regular file")
    return fd, st


def read_bytes(path, limit: int) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes (NotAWorkerFile otherwise)."""
    fd, st = _open_regular(path)
    try:
        if st.st_size > limit:
            raise NotAWorkerFile(f"{os.path.basename(path)} is larger than {limit} bytes")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit + 1)[:limit]
    finally:
        os.close(fd)


def tail(path, n: int = 2000) -> str:
    """The last ``n`` bytes of a regular file, as text ("" for anything else)."""
    try:
        fd, st = _open_regular(path)
    except OSError:
        return ""
    try:
        os.lseek(fd, max(0, st.st_size - n), os.SEEK_SET)
        return os.read(fd, n).decode("utf-8", "replace")
    finally:
        os.close(fd)


def read_text(path, limit: int = 4096) -> str:
    return read_bytes(path, limit).decode("utf-8", "replace")


def load_torch(path, limit: int = 8 << 30):
    """``torch.load`` of plain data (weights_only) from a regular file of at most ``limit`` bytes."""
    import torch
    return torch.load(io.BytesIO(read_bytes(path, limit)), weights_only=True)


def write_new(path, data) -> None:
    """Create ``path`` holding ``data`` (text or bytes); FileExistsError if anything (a link too) is there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def copy_regular_files(src, dst, limit_each: int = 256 << 20, limit_total: int = 1 << 30) -> None:
    """Copy the regular files directly in folder ``src`` (not a link itself) into a new folder ``dst``; links,
    pipes, devices and sub-folders are left behind; past the size limits nothing more is copied."""
    src, dst = pathlib.Path(src), pathlib.Path(dst)
    try:
        if not stat.S_ISDIR(os.lstat(src).st_mode):
            return
    except OSError:
        return
    dst.mkdir()
    total = 0
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        if not entry.is_file(follow_symlinks=False):
            continue
        try:
            data = read_bytes(entry.path, limit_each)
        except OSError:
            continue
        total += len(data)
        if total > limit_total:
            return
        write_new(dst / entry.name, data)
