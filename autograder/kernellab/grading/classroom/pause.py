"""Pausing the grading processes that share a GPU while another one times, instead of waiting for them to end.

A timed process (a judge timing, a speed problem's worker autotuning) must have its GPU alone. Before this, it waited
until every untimed process on that GPU had ended, and no new one started meanwhile: the GPU and the cores emptied
while the last workers finished (a drain of seconds before each batch of timings), then sat idle but for the timing.
Now each untimed process is paused instead, at once:
- one with a CUDA context is locked by the CUDA driver (``cuCheckpointProcessLock``, driver 570 and newer): its work
  already submitted completes before the lock returns, and its next CUDA call waits until it is unlocked. Its CPU
  threads run on until then (a worker's Python stops at its next CUDA call, which holds the GIL: an H200 probe,
  2026-11-27 12:47 UTC, locked and unlocked a busy process in 0.5 ms each);
- a process without a context (a worker still starting) is not stopped on a GPU machine: stopped while it makes
  its context it may hold the driver's locks, and every CUDA call of the machine waits (a first version did so and
  a class hung). The timing waits until it has a context and can be locked. Triton's own compilers (ptxas and the
  tools beside it, which never touch a GPU) run on.
Every process of its tree is paused, and the tree is looked at again every 50 ms while the timing runs
(``Paused.refresh``), as a locked process may start others; the zygote kills any process that leaves it
(grading/processes/zygote.py). A process that makes a context during a timing is locked at the next look (it may have run
up to that long beside the timing: residual risk, GRADE_OF_RECORD.md).

What cannot be paused is waited for as before: a process stopped with a context (the driver's lock never returns for
it, even past its timeout: the same probe), a lock that fails or times out (work submitted that runs for seconds). A
lock is asked of a helper process (``python pause.py``), never of the grading process itself, so a lock that never
returns costs a helper, which is killed, not the grading. Where the driver has no such lock (a CPU grader, a driver
before 570) nothing is paused and timings wait as before. ``KERNELLAB_PAUSE=0`` turns pausing off.

This file imports nothing of kernellab and runs as the helper: its main reads "lock PID MS", "unlock PID" and
"state PID" lines and answers each with the driver's result code and, for state, the process's state.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time

# The driver's checkpoint states (CUprocessState) and the results used here (CUresult).
RUNNING, LOCKED = 0, 1
CUDA_SUCCESS, CUDA_ERROR_NOT_INITIALIZED = 0, 3
NO_CONTEXT = "none"  # the process has no CUDA state (or, in the tests' stop mode, there is no CUDA driver here)
LOCK_MS = 5000  # how long the driver may wait for a process's submitted work before the lock gives up
HELPER_S = 10.0  # how long a helper may take to answer before it is killed (a lock that never returns)


def enabled() -> bool:
    return os.environ.get("KERNELLAB_PAUSE", "1") != "0"


# ----------------------------------------------------------------------------------------------- the process tree


def tree(pid: int) -> list[int]:
    """``pid`` and every process under it (children of any of its threads, and theirs), parents first."""
    out, todo, seen = [], [pid], set()
    while todo:
        p = todo.pop(0)
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                pass
    return out


def run_state(pid: int) -> str:
    """The process's scheduler state letter (R, S, D, T stopped, t traced, Z zombie), or "" where it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _toolchain_folder() -> str | None:
    """Where Triton keeps ptxas and the tools beside it: a process running one of them never touches a GPU, and a
    learner cannot write there (the worker is confined: grading/processes/sandbox.py)."""
    try:
        import triton
    except Exception:  # noqa: BLE001 - no Triton: nothing is exempt
        return None
    return os.path.realpath(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin"))


def is_toolchain(pid: int, folder: str | None) -> bool:
    if not folder:
        return False
    try:
        exe = os.path.realpath(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return False
    return exe.startswith(folder + os.sep)


# ----------------------------------------------------------------------------------------------- the helper


def _driver():
    import ctypes
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, None, None
    if not hasattr(cu, "cuCheckpointProcessLock") or cu.cuInit(0) != CUDA_SUCCESS:
        return None, None, None

    class LockArgs(ctypes.Structure):
        _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]

    class UnlockArgs(ctypes.Structure):
        _fields_ = [("reserved", ctypes.c_uint64 * 8)]
    return cu, LockArgs, UnlockArgs


def serve() -> None:
    """The helper's loop: one request per line of stdin, one answer per line of stdout ("CODE STATE")."""
    import ctypes
    # It ends when the grading process does: its stdin closes. (Not PR_SET_PDEATHSIG, which fires when the thread
    # that started it ends, and a grading thread may have.)
    cu, LockArgs, UnlockArgs = _driver()
    print("ready" if cu is not None else "no-driver", flush=True)
    for line in sys.stdin:
        parts = line.split()
        if len(parts) < 2:
            continue
        op, pid = parts[0], int(parts[1])
        state = ctypes.c_int(-1)
        if op == "state":
            code = cu.cuCheckpointProcessGetState(pid, ctypes.byref(state))
        elif op == "lock":
            args = LockArgs()
            args.timeoutMs = int(parts[2]) if len(parts) > 2 else LOCK_MS
            code = cu.cuCheckpointProcessLock(pid, ctypes.byref(args))
        else:
            code = cu.cuCheckpointProcessUnlock(pid, ctypes.byref(UnlockArgs()))
        print(f"{code} {state.value}", flush=True)


class Driver:
    """The grading process's side of the helper: ``ask`` sends one request and waits for its answer, at most
    HELPER_S; a helper that does not answer is killed and the next request starts another. ``available`` is False
    where the driver has no checkpoint lock (no GPU, an older driver)."""

    def __init__(self, command: list | None = None):
        self.command = command or [sys.executable, "-S", os.path.abspath(__file__)]
        self._lock = threading.Lock()
        self._proc = None
        self.available = None  # unknown until the first helper starts

    def usable(self) -> bool:
        """Whether the driver here has the checkpoint lock (starts the helper to find out, once)."""
        with self._lock:
            if self.available is None and self._proc is None:
                self._start()
            return bool(self.available)

    def _start(self) -> bool:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}  # any GPU's processes
        self._proc = subprocess.Popen(self.command, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        first = self._read(30.0)
        self.available = first == "ready"
        if not self.available:
            self.close()
        return self.available

    def _read(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        return self._proc.stdout.readline().strip() if ready else None

    def ask(self, op: str, pid: int, *extra) -> tuple[int, int] | None:
        """(result code, state) of the request, or None: no driver lock here, or the helper did not answer."""
        with self._lock:
            if self.available is False:
                return None
            if self._proc is None and not self._start():
                return None
            try:
                self._proc.stdin.write(" ".join(str(x) for x in (op, pid, *extra)) + "\n")
                self._proc.stdin.flush()
                answer = self._read(HELPER_S)
            except (OSError, ValueError):
                answer = None
            if not answer:
                self.close()  # stuck in the driver (or dead): the next request starts a fresh helper
                return None
            code, state = answer.split()
            return int(code), int(state)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.kill()
            except OSError:
                pass


# ----------------------------------------------------------------------------------------------- pausing a tree


class Paused:
    """The processes of one grading process's tree that are paused: ``locked`` (the driver's lock) and ``stopped``
    (SIGSTOP: ``Pauser.stop_without_cuda``, the tests' mode on a CPU). ``refresh`` pauses processes that appeared
    since; ``resume`` lets them all go on."""

    def __init__(self, pauser: "Pauser", pid: int):
        self.pauser, self.pid, self.locked, self.stopped, self.exempt = pauser, pid, [], [], set()

    def refresh(self, running: bool = False) -> bool:
        """Pause every process of the tree not yet paused; False where one cannot be. ``running``: a timing runs,
        and a process without a context is left to run (where there is a driver) until it makes one."""
        done = set(self.locked) | set(self.stopped) | self.exempt
        for p in tree(self.pid):
            if p not in done and not self.pauser.pause_one(p, self, running):
                return False
        return True

    def resume(self) -> None:
        for p in self.locked:
            for _ in range(2):  # a helper that died is started again for a second try
                if self.pauser.driver.ask("unlock", p) is not None:
                    break
        for p in self.stopped:
            try:
                os.kill(p, signal.SIGCONT)
            except OSError:
                pass
        self.locked, self.stopped = [], []


class Pauser:
    """Pauses process trees. ``stop_without_cuda``: stop (SIGSTOP) a process without CUDA state, as is safe only
    where there is no CUDA at all; the tests use it to pause real process trees on a CPU. A grader on a CPU pauses
    nothing (GpuSlots): its timings award nothing, and stopping the other processes would only idle cores."""

    def __init__(self, driver: Driver | None = None, stop_without_cuda: bool = False):
        self.driver = driver or Driver()
        self.toolchain = _toolchain_folder()
        self.stop_without_cuda = stop_without_cuda

    def pause(self, pid: int) -> Paused | None:
        """Pause ``pid``'s tree; None (and nothing left paused) where some process of it cannot be paused now."""
        paused = Paused(self, pid)
        if paused.refresh():
            return paused
        paused.resume()
        return None

    def context(self, pid: int) -> str | int | None:
        """NO_CONTEXT, the driver's state of the process's CUDA (RUNNING, LOCKED), or None: it could not be told."""
        answer = self.driver.ask("state", pid)
        if answer is None:
            return NO_CONTEXT if self.driver.available is False else None
        code, state = answer
        if code == CUDA_ERROR_NOT_INITIALIZED:
            return NO_CONTEXT
        return state if code == CUDA_SUCCESS else None

    def pause_one(self, p: int, paused: Paused, running: bool = False) -> bool:
        """Pause process ``p`` of ``paused``'s tree. Where the driver locks, a process without a context is never
        stopped: one stopped while it makes its context may hold the driver's locks that every other process's
        CUDA then waits for (a class on an H200 hung so, 2026-11-27 13:00 UTC); it cannot be paused now (the
        caller asks again shortly), or, while a timing runs (``running``), it is left to run until it has a context,
        then locked."""
        state = run_state(p)
        if not state or state == "Z":
            return True  # gone, or ended and not yet reaped: nothing of it runs
        if is_toolchain(p, self.toolchain):
            paused.exempt.add(p)
            return True
        ctx = self.context(p)
        if ctx == NO_CONTEXT:
            if self.stop_without_cuda:  # no CUDA on this machine: stopping is safe
                try:
                    os.kill(p, signal.SIGSTOP)
                except OSError:
                    return True  # gone
                _wait_stopped(p)
                paused.stopped.append(p)
                return True
            return running
        if ctx == LOCKED:  # left locked (a helper killed during its lock): runs nothing; unlocked on resume
            paused.locked.append(p)
            return True
        if ctx != RUNNING or state in ("T", "t"):
            return False  # not known, or stopped with a context: the driver's lock would never return
        answer = self.driver.ask("lock", p, LOCK_MS)
        if answer is not None and answer[0] == CUDA_SUCCESS:
            paused.locked.append(p)
            return True
        if answer is None and self.context(p) == LOCKED:  # the helper gave up after the lock took hold
            paused.locked.append(p)
            return True
        return False


def _wait_stopped(pid: int, limit_s: float = 1.0) -> None:
    end = time.monotonic() + limit_s
    while run_state(pid) not in ("T", "t", "Z", "") and time.monotonic() < end:
        time.sleep(0.001)


if __name__ == "__main__":
    serve()
