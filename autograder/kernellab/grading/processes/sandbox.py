"""Confine a grading process (a worker before it loads the learner's cells, a judge before it interprets a
kernel's body): Linux Landlock, which an unprivileged process may apply to itself and which everything it starts
inherits, and which no later code in it can lift.

What a confined worker (and any process it starts) can still do: read and run the system's and Python's files
(``/usr``, ``/lib``, ``/etc``, ``/opt``, ``/sys``, its own ``/proc`` entry and the machine-wide ones, the
interpreter's prefixes and its library folders on ``sys.path``, the kernellab package itself), use ``/dev`` (the GPU), and read and write its own job folder, its
scratch folder and its submission's Triton cache. What it can no longer do:
- read or write anything else: the course folder (the secret file, ``solutions/``, other students' submissions,
  the result store, the gradebook), the judge's folder beside its own, other jobs' folders, the home folder;
- send a signal to, or ptrace, any process it did not start (the grading process, the zygote, a judge);
- connect to or listen on TCP ports (a Ray cluster's), or reach abstract Unix sockets outside it.
A red-team submission (2026-11-27) forked a daemon from its worker that waited for the judge's secret inputs,
stopped the judge, wrote the judge's own reference in as its result and scored full points on any replayed
problem; another killed the grading process from an answers cell. Both are what this removes.

Older kernels have less of Landlock (ABI 2-5: files only, or files and TCP); a kernel without it, or with ABI 1
(Linux 5.13-5.18, which refuses every rename between folders, as Triton's cache does), leaves the worker
unconfined, and the grading record says which. Nothing here is a reason to refuse to grade.
"""
from __future__ import annotations

import ctypes
import os
import sys

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446  # the same numbers on every architecture (asm-generic)
_PATH_BENEATH = 1
_VERSION = 1
# File access rights by the ABI that introduced them.
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR, _MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
_MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, 3
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_WRITE = (_WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK | _MAKE_FIFO
          | _MAKE_BLOCK | _MAKE_SYM)
_BIND_TCP, _CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
_PR_SET_NO_NEW_PRIVS = 38

# Read-only system folders a Python with torch and Triton (and CUDA) reads as it runs.
SYSTEM_READ = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/sys", "/snap")
# Of /proc, this process's own folder and the machine's: never another process's (the grading process's
# environment may hold KERNELLAB_SECRET, which its /proc/PID/environ shows to the same user).
PROC_READ = ("cpuinfo", "meminfo", "stat", "uptime", "loadavg", "version", "sys", "driver", "filesystems", "mounts",
             "devices", "interrupts", "zoneinfo", "buddyinfo", "pressure")
DEVICES = "/dev"


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The kernel's Landlock ABI version (0: none, or not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    v = libc.syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    return max(0, int(v))


def library_folders(protect: list[str]) -> list[str]:
    """Folders Python loads code from: its prefixes and the ``sys.path`` entries, less any that hold or lie above a
    ``protect``ed path (``PYTHONPATH=autograder`` would otherwise open the course folder): the kernellab package
    is granted by itself instead."""
    import kernellab
    package = os.path.dirname(os.path.realpath(kernellab.__file__))
    prefixes = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    found = {*prefixes, package} | {p for p in sys.path if p and os.path.isdir(p)}
    out = []
    for p in sorted({os.path.realpath(p) for p in found}):
        above = any(_within(q, p) for q in protect)  # it holds a protected folder, or is one
        inside = any(_within(p, q) for q in protect)  # e.g. autograder/ on PYTHONPATH, beside the secret
        library = any(_within(p, x) for x in prefixes) or "-packages" in p
        if p == package or not (above or (inside and not library)):
            out.append(p)
    return out


def _within(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or inside it."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def confine(writable: list[str], protect: list[str]) -> str:
    """Confine this process and what it starts (see the module's text): ``writable`` folders read and written,
    the system, Python's folders and ``/dev`` read, nothing under ``protect`` unless it is writable or the package.
    Returns what was done, for the grading record ("landlock ABI 7: files, TCP, signals" or why nothing)."""
    version = abi()
    if version < 1:
        return "not confined: this kernel has no Landlock"
    if version < 2:  # ABI 1 refuses every rename between folders, and Triton's cache moves each file it writes
        return "not confined: Landlock ABI 1 (Linux 5.13-5.18) cannot allow Triton's cache to move its files"
    fs = _READ | _WRITE | _REFER | (_TRUNCATE if version >= 3 else 0)
    net = (_BIND_TCP | _CONNECT_TCP) if version >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if version >= 6 else 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    attr = _RulesetAttr(fs, net, scoped)
    size = ctypes.sizeof(_RulesetAttr) if version >= 6 else (16 if version >= 4 else 8)
    ruleset = libc.syscall(_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"not confined: landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    proc = [f"/proc/{os.getpid()}", *(f"/proc/{name}" for name in PROC_READ)]
    rules = [(p, _READ) for p in (*SYSTEM_READ, *proc, *library_folders(protect))] + [(DEVICES, fs)]
    rules += [(p, fs) for p in writable]
    try:
        for path, access in rules:
            _allow(libc, ruleset, path, access & fs)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"not confined: no_new_privs refused ({os.strerror(ctypes.get_errno())})"
        if libc.syscall(_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"not confined: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    except OSError as exc:  # a rule the kernel refused: nothing was applied yet
        return f"not confined: {exc}"
    finally:
        os.close(ruleset)
    what = ["files"] + (["TCP"] if net else []) + (["signals", "abstract sockets"] if scoped else [])
    return f"landlock ABI {version}: " + ", ".join(what)


def confine_job(job_dir, *also: str) -> str:
    """Confine a grading process to its job folder (``confine``): from here it (and every process it starts) reads
    and writes only ``job_dir``, the folders ``also`` (a worker's scratch folder) and its Triton and Inductor caches
    (TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR), reads the system's and Python's folders, and signals nothing it did
    not start. Protected, even where a sys.path entry would open them: the grading's temporary folder (other jobs'
    folders, the judge's beside a worker's), the course's checkout (its secret, solutions, submissions and store)
    and the home folder. A worker applies it before any learner code exists in it, an interpreting judge before it
    runs a kernel's body (grading/judge/judge.py)."""
    from kernellab.paths import repo_root
    job_dir = os.fspath(job_dir)
    writable = [job_dir, *also] + [os.environ[k] for k in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")
                                   if os.environ.get(k)]
    root = repo_root()  # a checkout's root; an installed package's is Python's own library folder
    checkout = [str(root)] if (root / "autograder").is_dir() else []
    return confine(writable, [os.path.dirname(os.path.realpath(job_dir)), *checkout, os.path.expanduser("~")])


def _allow(libc, ruleset: int, path: str, access: int) -> None:
    """Grant ``access`` beneath ``path`` (skipped where it does not exist). A file gets only the file rights."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            access &= _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE
        rule = _PathBeneath(access, fd)
        if libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_PATH_BENEATH), ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)

