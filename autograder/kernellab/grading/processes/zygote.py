"""Grading processes forked from a warm one (a "zygote") instead of started as a fresh Python each time.

A fresh worker or judge spends 1-3 s importing torch and Triton before it reads its job; a class file starts
hundreds of them. The zygote imports once, then forks one process per job. A fork is what a fresh process
would be:
- the zygote is started with the child environment (no secret, no grading marker) and runs no learner code;
  each fork's environment is replaced by the job's before anything else runs, and it gets its own session,
  log file, working folder and the parent's budgets (the grader watches it like any child);
- it never initialises CUDA (a fork of a process that has is unusable), so on a GPU it imports torch and
  Triton only; where kernels are interpreted (no GPU, or a judge counting reads) it imports kernellab too;
- it is not dumpable: its forks, which run learner code, cannot ptrace it or write its memory to change what
  later forks start from (they are reset to dumpable, like any process);
- it dies with the grader (PR_SET_PDEATHSIG) and its forks die with it;
- it is their subreaper (PR_SET_CHILD_SUBREAPER): a process a fork started and left behind (a double-forked
  daemon in its own session, which no group kill reaches) becomes the zygote's child when its parent ends, and
  the zygote kills it at once; before it reports a fork's exit it kills what that fork left, so nothing of a
  worker still runs when its judge starts.
A zygote that died (killed from outside) or does not answer is replaced, and the job starts as a fresh process
instead. ``KERNELLAB_ZYGOTE=0`` turns forking off.

Protocol: JSON lines. The grader sends {"id", "module", "args", "env", "cwd", "log"}; the zygote answers
{"ready"} once after importing, {"id", "pid"} per fork and {"exit": pid, "code"} when a fork ends (code as
subprocess reports it: negative for a signal).
"""
from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time

_PR_SET_PDEATHSIG, _PR_SET_NAME, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 1, 15, 4, 36
# Changed per job, so not part of which zygote a job forks from (nothing reads them before the fork's own code).
_PER_JOB_ENV = ("CUDA_VISIBLE_DEVICES", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


def _prctl(option: int, value) -> None:
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def die_with_parent(parent_pid: int) -> None:
    """A grading stopped from outside (Ctrl-C, `timeout`, a killed nbgrader) must not leave this process
    running on the GPU, where it would slow the next gradings' timed runs. A grading process runs in its own
    session (so the budget can kill its whole group), which no signal to the parent's group reaches: Linux kills
    it when the parent dies; the parent-id check covers a parent that died before that was set. (Here, not in
    child.py: the zygote runs as a script that must not import kernellab.)"""
    if sys.platform.startswith("linux"):
        _prctl(_PR_SET_PDEATHSIG, 9)  # SIGKILL
    if os.getppid() != parent_pid:
        os._exit(70)


def kill_group(proc) -> None:
    """Kill a grading process (a Popen or a Forked) and its whole group (its own session), and reap it."""
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        proc.kill()
    proc.wait()


def _name(name: str) -> None:
    """The process's short name (/proc/PID/comm): a fork keeps the zygote's command line, so this is how a
    person (or a test) tells workers and judges apart in ps."""
    _prctl(_PR_SET_NAME, name.encode()[:15])


# ----------------------------------------------------------------------------------------- the zygote process


def _preload(full: bool) -> None:
    import numpy  # noqa: F401
    import torch
    if full:  # kernels interpreted: kernellab sets TRITON_INTERPRET before Triton loads, and touches no GPU
        import kernellab  # noqa: F401
        import kernellab.code_rules  # noqa: F401
        import kernellab.grading.worker.integrity  # noqa: F401
        import kernellab.notebook_cells  # noqa: F401
        import kernellab.problems.base  # noqa: F401
        import kernellab.record  # noqa: F401
        import kernellab.timing  # noqa: F401
        import kernellab.watch  # noqa: F401
    else:  # on a GPU kernellab would initialise CUDA (it reads the device), which a fork cannot inherit
        import triton  # noqa: F401
        import triton.language  # noqa: F401
        _warm_triton()
    # after kernellab: what it imports imports Triton, which kernellab must precede
    with _noting_cuda_calls(torch):
        _enter_a_dispatch_mode(torch)


def _warm_triton() -> None:
    """What every GPU worker did again after its fork (py-spy over a class of lesson 01 on one H200, 2026-11-26):
    Triton's cache key hashes its sources and its whole compiler library before the first compile (28 % of the
    workers' CPU in lesson 01, 11 % in lesson 02), the first launch's binder imports Triton's gluon package, and
    watch.py's launch targets import the interpreter module (10 % more together). None of it reads the GPU or
    picks a driver (``cuda_touched`` checks after). Triton versions without one of them skip it."""
    import importlib
    for name in ("triton.experimental.gluon", "triton.runtime.interpreter"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    with contextlib.suppress(ImportError, AttributeError, OSError):
        from triton.runtime.cache import triton_key
        triton_key()  # functools.lru_cache: every fork inherits the answer


_CUDA_CALLS: list = []  # torch's CUDA entry points the warm-up called (any of them may start the CUDA driver)


@contextlib.contextmanager
def _noting_cuda_calls(torch):
    """For the block, note in _CUDA_CALLS each call of torch's entry points that may start the CUDA driver
    (asking for devices starts it without torch counting CUDA as initialised)."""
    saved = []
    for owner, name in [(torch.cuda, n) for n in ("is_available", "device_count", "_lazy_init", "init")] + \
            [(torch._C, n) for n in ("_cuda_getDeviceCount", "_cuda_init")]:
        f = getattr(owner, name, None)
        if f is None:
            continue

        def noted(*args, _f=f, _name=name, **kwargs):
            _CUDA_CALLS.append(_name)
            return _f(*args, **kwargs)
        setattr(owner, name, noted)
        saved.append((owner, name, f))
    try:
        yield
    finally:
        for owner, name, f in saved:
            setattr(owner, name, f)


def cuda_touched(torch, triton_driver=None, calls=()) -> str | None:
    """Why this process can no longer give forks that use the GPU, or None: torch initialised CUDA, its imports
    called a torch entry point that may start the CUDA driver (``calls``), or Triton chose its driver (which asks
    CUDA for devices). Checked after the imports a GPU zygote does, so a torch or Triton whose imports began
    touching the GPU makes grading fall back to fresh processes, not fail."""
    if torch.cuda.is_initialized():
        return "torch initialised CUDA"
    if calls:
        return f"its imports called torch's {calls[0]}"
    if triton_driver is not None and (getattr(triton_driver, "_active", None) is not None
                                      or getattr(triton_driver, "_default", None) is not None):
        return "Triton chose its GPU driver"
    return None


def _enter_a_dispatch_mode(torch) -> None:
    """Enter a dispatch mode once, on an empty CPU tensor. The first one a process enters imports torch._dynamo,
    and every recording worker enters one (watch.py): on two H200s under a class's load that import took a speed
    worker 3.9-4.9 s, a quarter of lesson 02's worker seconds. Done here once, every fork has it. It touches no GPU
    and starts no thread (tests/test_zygote.py). watch.warm_up does the same for a process not forked from here;
    this one cannot import it (kernellab reads the GPU)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Pass(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with _Pass():
        torch.empty(0)


def _become(req: dict, ctl: tuple, zygote_pid: int, preloaded_env: dict) -> None:
    """In the fork: turn into the job's process and run its module; never returns. ``preloaded_env``: what the
    zygote's imports put in its environment (kernellab's TRITON_INTERPRET): the modules the fork inherits were
    set up under it, so it stays."""
    code = 70
    try:
        for fd in ctl:
            os.close(fd)
        os.setsid()
        die_with_parent(zygote_pid)  # from the start, before the job's module is even imported
        _prctl(_PR_SET_DUMPABLE, 1)
        _name("kl-" + req["module"].rsplit(".", 1)[-1])
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.environ.clear()
        os.environ.update({**preloaded_env, **req["env"]})
        os.chdir(req["cwd"])
        sys.argv = [req["module"], *req["args"], str(zygote_pid)]
        req.clear()
        import runpy
        try:
            runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001  (reported in the job's log, like an uncaught error in a fresh process)
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def serve(parent_pid: int, full: bool, scratch: str) -> None:
    # Run as a script, not ``-m kernellab...``: importing the package would read the GPU, initialising CUDA.
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # grading/'s own files are not top-level modules
    die_with_parent(parent_pid)
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _name("kl-zygote")
    # The control pipes move off 0 and 1, so nothing an import prints can corrupt them; forks close them.
    ctl_in, ctl_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    before = dict(os.environ)
    # torch._dynamo's import makes Inductor's cache folder and names it in the environment (by default one folder
    # per user in the temporary folder, shared by every process): here ``scratch``, a folder beside the zygote's
    # log (which the grader removes, even if this process is killed mid-import), gone before any fork, so no fork
    # inherits a folder another fork could write (each job is told its own: harness).
    os.makedirs(scratch, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = scratch
    try:
        _preload(full)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    preloaded_env = {k: v for k, v in os.environ.items() if before.get(k) != v}
    me = os.getpid()

    def send(msg: dict) -> None:
        os.write(ctl_out, (json.dumps(msg) + "\n").encode())
    if not full:
        import torch
        import triton.runtime
        why = cuda_touched(torch, getattr(triton.runtime, "driver", None), _CUDA_CALLS)
        if why:  # a fork could not use the GPU: this environment's processes start fresh instead
            send({"refused": why})
            return
    send({"ready": True})
    buf, forks = b"", set()
    strays: set = set()  # processes left by forks, killed, not yet reaped
    while True:
        ready, _, _ = select.select([ctl_in], [], [], 0.05)
        if ready:
            chunk = os.read(ctl_in, 1 << 16)
            if not chunk:  # the grader closed the pipe (or died): forks die with this process
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                req = json.loads(line)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    buf = b""
                    _become(req, (ctl_in, ctl_out), me, preloaded_env)
                forks.add(pid)
                send({"id": req["id"], "pid": pid})
        _kill_strays(me, forks, strays)
        for pid in list(forks):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                forks.discard(pid)
                # What it left was reparented here before its exit could be seen: dead (reaped) before it is told.
                _kill_strays(me, forks, strays, wait_s=5.0)
                send({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _children(me: int) -> set:
    """This (single-threaded) process's children: /proc's list where the kernel keeps one, else a scan of /proc."""
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return {int(p) for p in f.read().split()}
    except OSError:
        kids = set()
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                            kids.add(int(name))
                except (OSError, ValueError, IndexError):
                    pass
        return kids


def _kill_strays(me: int, forks: set, strays: set, wait_s: float = 0.0) -> None:
    """Kill every child of the zygote that is not one of its forks (orphans reparented to it, the subreaper), again
    while killing them orphans more (their own children come here next), and reap those that died; with ``wait_s``,
    wait up to that long for every one to have died (a killed process takes a moment to end). At most a second past
    ``wait_s`` in all: a live fork that keeps leaving orphans cannot hold the zygote here."""
    deadline = time.monotonic() + wait_s
    while True:
        new = _children(me) - forks - strays
        for pid in new:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        strays |= new
        for pid in list(strays):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                strays.discard(pid)
        now = time.monotonic()
        if (not new and (not strays or now > deadline)) or now > deadline + 1.0:
            return
        time.sleep(0.001)


# ------------------------------------------------------------------------------------------ the grader's side


class Forked:
    """A process forked by a zygote, with what the harness uses of subprocess.Popen."""

    def __init__(self, zygote: "Zygote", pid: int):
        self._z, self.pid, self.returncode = zygote, pid, None

    def poll(self):
        if self.returncode is None:
            self.returncode = self._z._exit_code(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None):
        if self.returncode is None:
            self.returncode = self._z._exit_code(self.pid, timeout)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, 9)
            except OSError:
                pass


class Zygote:
    """One zygote process, started from a thread of its own (the death signal follows the thread that started
    it, and a pool's threads end before the grader does)."""

    def __init__(self, env: dict, full: bool, log: str):
        self._lock, self._cond = threading.Lock(), threading.Condition()
        self._ids = itertools.count()
        self._pids: dict = {}
        self._exits: dict = {}
        self.ready = self.dead = False
        self.refused = None  # why it gives no forks (its imports touched the GPU): then none for its environment
        self.proc = None
        started = threading.Event()
        threading.Thread(target=self._run, args=(env, full, log, started), daemon=True, name="kl-zygote").start()
        started.wait()

    def _run(self, env, full, log, started) -> None:
        try:
            with open(log, "ab") as err:
                self.proc = subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), str(os.getpid()), "full" if full else "light",
                     os.path.splitext(log)[0] + "-inductor"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, start_new_session=True)
        except OSError:
            self.proc = None
        started.set()
        if self.proc is not None:
            for line in self.proc.stdout:
                try:
                    msg = json.loads(line)
                except ValueError:
                    break
                with self._cond:
                    if "ready" in msg:
                        self.ready = True
                    elif "refused" in msg:
                        self.refused, self.dead = msg["refused"], True
                        print(f"kernellab: grading processes start fresh (slower) for want of a warm one to fork: "
                              f"{self.refused} in it", file=sys.stderr)
                    elif "pid" in msg:
                        self._pids[msg["id"]] = msg["pid"]
                    elif "exit" in msg:
                        self._exits[msg["exit"]] = msg["code"]
                    self._cond.notify_all()
        with self._cond:
            self.dead = True
            self._cond.notify_all()

    def spawn(self, module: str, args: list, env: dict, cwd: str, log: str, timeout: float = 120.0):
        """A fork running ``python -m module *args ZYGOTE_PID``, or None where this zygote cannot give one."""
        if self.proc is None:
            return None
        with self._lock:  # one request at a time
            with self._cond:
                if not self._cond.wait_for(lambda: self.ready or self.dead, timeout) or self.dead:
                    return None
                rid = next(self._ids)
            try:
                self.proc.stdin.write((json.dumps({"id": rid, "module": module, "args": [str(a) for a in args],
                                                   "env": env, "cwd": str(cwd), "log": str(log)}) + "\n").encode())
                self.proc.stdin.flush()
            except (OSError, ValueError):
                return None
            with self._cond:
                if not self._cond.wait_for(lambda: rid in self._pids or self.dead, 30.0) or rid not in self._pids:
                    self.dead = True  # it does not answer (stopped from outside?): the next job gets a new one
                    return None
                return Forked(self, self._pids.pop(rid))

    def _exit_code(self, pid: int, timeout: float | None):
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or self.dead, timeout)
            if pid in self._exits:
                return self._exits.pop(pid)
            # The zygote died, and its forks with it (their death signal follows it).
            return -9 if self.dead else None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_group(self.proc)


_ZYGOTES: dict = {}
_ZYGOTES_LOCK = threading.Lock()


def enabled() -> bool:
    return sys.platform.startswith("linux") and os.environ.get("KERNELLAB_ZYGOTE", "1") != "0"


_LOG_DIR: list = []


def _shared_env(env: dict) -> dict:
    """What of a job's environment its zygote is started with (all but what changes per job)."""
    return {k: v for k, v in env.items() if k not in _PER_JOB_ENV}


def key_for(env: dict, full: bool) -> tuple:
    """Which zygote a job of ``env`` forks from: one per environment (less what changes per job) and kind."""
    return full, tuple(sorted(_shared_env(env).items()))


def spawn(module: str, args: list, env: dict, cwd, log, full: bool):
    """A fork of the zygote for ``env`` (started if needed) running ``module``, or None (then start a fresh
    process). ``full``: the zygote may import kernellab (kernels are interpreted there)."""
    if not enabled():
        return None
    key = key_for(env, full)
    with _ZYGOTES_LOCK:
        z = _ZYGOTES.get(key)
        if z is not None and z.refused:
            return None
        if z is None or z.dead:
            if z is not None:
                z.stop()
            if not _LOG_DIR:
                import tempfile
                _LOG_DIR.append(tempfile.mkdtemp(prefix="kl-zygote-"))
                atexit.register(stop_all)  # any grading process (nbgrader's, a Ray worker's): its logs go with it
            z = _ZYGOTES[key] = Zygote(_shared_env(env), full, os.path.join(_LOG_DIR[0], f"zygote-{len(_ZYGOTES)}.log"))
    return z.spawn(module, args, env, cwd, log)


def stop_all() -> None:
    """Stop every zygote of this process (and so every process forked from them)."""
    with _ZYGOTES_LOCK:
        for z in _ZYGOTES.values():
            z.stop()
        _ZYGOTES.clear()
        if _LOG_DIR:  # the zygotes' own logs (each job's log is the job's)
            shutil.rmtree(_LOG_DIR.pop(), ignore_errors=True)


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2] == "full", sys.argv[3])
