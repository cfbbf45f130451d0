"""Pausing untimed grading processes while another times (grading/classroom/pause.py, slots.GpuSlots): real process trees on
the CPU, where every process has no CUDA context and is stopped; the driver's lock through a stand-in driver."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

import pytest

from kernellab.grading.judge import harness
from kernellab.grading.classroom import pause
from kernellab.grading.classroom.slots import GpuSlots

# A process that counts into a file, with a child that counts into another (a worker and what it started).
COUNTER = r'''
import os, sys, time, pathlib
out = pathlib.Path(sys.argv[1])
if os.fork() == 0:
    out = out.with_suffix(".child")
n = 0
while True:
    n += 1
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(str(n))
    os.replace(tmp, out)
    time.sleep(0.005)
'''


def _count(path: pathlib.Path) -> int:
    for _ in range(50):
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.01)
    return 0


def _advancing(path: pathlib.Path, wait_s: float = 0.3) -> bool:
    a = _count(path)
    time.sleep(wait_s)
    return _count(path) > a


@pytest.fixture
def counter(tmp_path):
    script = tmp_path / "counter.py"
    script.write_text(COUNTER)
    out = tmp_path / "count.txt"
    proc = subprocess.Popen([sys.executable, str(script), str(out)], start_new_session=True)
    for _ in range(200):
        if out.exists() and out.with_suffix(".child").exists():
            break
        time.sleep(0.02)
    yield proc, out
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        pass
    proc.wait()


def _cpu_pauser() -> pause.Pauser:
    """A pauser that knows there is no CUDA here (this CPU): it stops processes."""
    pauser = pause.Pauser(stop_without_cuda=True)
    pauser.driver.available = False
    return pauser


def _slots_on_cpu() -> GpuSlots:
    """One slot with that pauser (a grader on a CPU has none: its timings wait for the others to end)."""
    slots = GpuSlots(1)
    assert slots.pauser is None
    slots.pauser = _cpu_pauser()
    return slots


def _shared_hold(slots: GpuSlots, pid: int):
    """An untimed hold of process ``pid`` (slots.process, entered): (its context manager, kept, and the holder)."""
    hold = slots.process(False)
    held = hold.__enter__()
    held.started(pid)
    return hold, held


class FakeDriver:
    """The driver's checkpoint calls as the helper answers them, for processes said to have a CUDA context."""

    def __init__(self, contexts: set, lock_fails: set = frozenset()):
        self.contexts, self.lock_fails, self.calls, self.available = contexts, lock_fails, [], True

    def ask(self, op, pid, *extra):
        self.calls.append((op, pid))
        if op == "state":
            return (0, pause.RUNNING) if pid in self.contexts else (pause.CUDA_ERROR_NOT_INITIALIZED, -1)
        if op == "lock":
            return (2, -1) if pid in self.lock_fails else (0, -1)
        return 0, -1


def test_a_tree_without_contexts_is_stopped_and_resumed(counter):
    proc, out = counter
    pauser = _cpu_pauser()  # no driver lock (this CPU): every process has no context
    kids = pause.tree(proc.pid)
    assert len(kids) == 2 and kids[0] == proc.pid
    assert _advancing(out) and _advancing(out.with_suffix(".child"))
    paused = pauser.pause(proc.pid)
    assert paused is not None and sorted(paused.stopped) == sorted(kids) and not paused.locked
    assert all(pause.run_state(p) == "T" for p in kids)
    assert not _advancing(out) and not _advancing(out.with_suffix(".child"))
    paused.resume()
    assert _advancing(out) and _advancing(out.with_suffix(".child"))


def test_with_a_driver_a_process_with_a_context_is_locked_and_one_without_is_never_stopped(counter):
    """Where the driver locks, a process without a context is not stopped (stopped while it makes one, it may hold
    the driver's locks: a class hung so on an H200): its tree is not pausable until it has one; while a timing runs,
    a new such process is left running."""
    proc, out = counter
    child = pause.tree(proc.pid)[1]
    driver = FakeDriver(contexts={proc.pid})
    pauser = pause.Pauser(driver)
    assert pauser.pause(proc.pid) is None  # the child has no context yet
    assert ("unlock", proc.pid) in driver.calls and _advancing(out.with_suffix(".child"))
    paused = pause.Paused(pauser, proc.pid)
    assert paused.refresh(running=True) and paused.locked == [proc.pid] and not paused.stopped
    assert pause.run_state(child) != "T" and pause.run_state(proc.pid) != "T"  # locked: its CPU threads run on
    driver.contexts.add(child)  # it makes a context: locked at the next look
    assert paused.refresh(running=True) and paused.locked == [proc.pid, child]
    paused.resume()
    assert ("unlock", child) in driver.calls
    # A lock the driver refuses (or that times out): the tree is not paused, and what was locked is unlocked.
    driver = FakeDriver(contexts={proc.pid, child}, lock_fails={child})
    assert pause.Pauser(driver).pause(proc.pid) is None
    assert driver.calls.count(("unlock", proc.pid)) == 1


def test_a_process_stopped_with_a_context_is_never_locked(counter):
    """The driver's lock of a stopped process with a context never returns (an H200, 2026-11-27): such a process
    is not asked for, and the caller waits for it instead."""
    proc, _ = counter
    driver = FakeDriver(contexts={proc.pid})
    os.kill(proc.pid, 19)  # SIGSTOP
    pause._wait_stopped(proc.pid)
    try:
        assert pause.Pauser(driver).pause(proc.pid) is None
        assert ("lock", proc.pid) not in driver.calls
    finally:
        os.kill(proc.pid, 18)


def test_triton_s_compilers_run_on(tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    shutil.copy(shutil.which("sleep"), folder / "ptxas")
    proc = subprocess.Popen([str(folder / "ptxas"), "30"])
    try:
        time.sleep(0.2)
        pauser = _cpu_pauser()
        pauser.toolchain = str(folder.resolve())
        paused = pauser.pause(proc.pid)
        assert paused.exempt == {proc.pid} and not paused.stopped and pause.run_state(proc.pid) != "T"
    finally:
        proc.kill()
        proc.wait()


def test_a_helper_that_does_not_answer_is_killed_and_the_next_request_starts_another(tmp_path, monkeypatch):
    script = tmp_path / "helper.py"
    script.write_text("import sys, time\nprint('ready', flush=True)\nsys.stdin.readline()\ntime.sleep(60)\n")
    monkeypatch.setattr(pause, "HELPER_S", 0.5)
    driver = pause.Driver([sys.executable, str(script)])
    t0 = time.monotonic()
    assert driver.ask("lock", os.getpid(), 10) is None
    assert time.monotonic() - t0 < 5 and driver._proc is None
    assert driver.ask("state", os.getpid()) is None  # a fresh helper, which does not answer either
    driver.close()
    # The real helper on a machine without the driver's checkpoint calls (this CPU): nothing to ask.
    real = pause.Driver()
    if not pathlib.Path("/dev/nvidiactl").exists():
        assert real.ask("state", os.getpid()) is None and real.available is False


def test_a_timing_pauses_the_untimed_processes_of_its_gpu_instead_of_waiting_for_them(counter):
    """A timed hold starts at once beside a running untimed process, which is paused for it (its tree stopped here)
    and goes on after; the paused seconds are counted for its budgets; a process the slots cannot pause is waited
    for, as before pausing."""
    proc, out = counter
    slots = _slots_on_cpu()
    with slots.place():
        holder, held = _shared_hold(slots, proc.pid)
        t0 = time.monotonic()
        with slots.hold(True):
            assert time.monotonic() - t0 < 2
            assert pause.run_state(proc.pid) == "T" and not _advancing(out)
            time.sleep(0.3)
        assert _advancing(out)
        assert held.paused_s() >= 0.5
        # Unpausable: the timer waits until the untimed hold ends.
        slots.pauser = None
        done = []
        t = threading.Thread(target=lambda: (slots._local.__setattr__("gpu", 0), slots.hold(True).__enter__(),
                                             done.append(time.monotonic())))
        t.start()
        time.sleep(0.4)
        assert not done and _advancing(out)
        t_end = time.monotonic()
        holder.__exit__(None, None, None)
        t.join(timeout=5)
        assert done and done[0] >= t_end


def test_what_a_paused_process_starts_during_a_timing_is_paused_too(tmp_path):
    script = tmp_path / "late.py"
    script.write_text("import os, sys, time, pathlib\ntime.sleep(0.6)\nif os.fork() == 0:\n"
                      "    n = 0\n    while True:\n        n += 1\n"
                      "        p = pathlib.Path(sys.argv[1] + '.tmp'); p.write_text(str(n)); os.replace(p, sys.argv[1])\n"
                      "        time.sleep(0.005)\n"
                      "time.sleep(60)\n")
    out = tmp_path / "late.txt"
    proc = subprocess.Popen([sys.executable, str(script), str(out)], start_new_session=True)
    slots = _slots_on_cpu()
    try:
        time.sleep(0.3)
        with slots.place(), slots.process(False) as held:
            held.started(proc.pid)
            with slots.hold(True):
                os.kill(proc.pid, 18)  # stand-in for a locked process whose CPU runs on: it forks meanwhile
                end = time.monotonic() + 10
                while time.monotonic() < end and not pause.tree(proc.pid)[1:]:
                    time.sleep(0.05)
                time.sleep(0.3)  # the watch looks every 50 ms
                kids = pause.tree(proc.pid)[1:]
                assert kids and all(pause.run_state(k) == "T" for k in kids)
            assert _advancing(out)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_budgets_leave_out_the_seconds_a_process_was_paused(tmp_path):
    """A run budget of 1 s and a child that runs 2 s, paused for 1.5 of them: not stopped."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2.0)"])
    (tmp_path / "phase").write_text("run")
    t0 = time.monotonic()
    why, phase = harness._watch(proc, tmp_path, {"run": 1.0}, None, [],
                                paused_s=lambda: min(1.5, max(0.0, time.monotonic() - t0 - 0.2)))
    assert why is None and proc.returncode == 0


def test_a_timed_hold_given_back_lets_what_it_paused_go_on_at_once(counter, tmp_path):
    """A tuning worker that shares its GPU again once tuned lets the processes it paused go on then, not when it
    ends; the next timed hold then pauses them and it. Resuming only at the end hung a class on an H200: the next
    judge, still paused, and the worker, paused by that judge's timing, waited for each other."""
    proc, out = counter
    script = tmp_path / "counter.py"
    out2 = tmp_path / "count2.txt"
    proc2 = subprocess.Popen([sys.executable, str(script), str(out2)], start_new_session=True)
    try:
        for _ in range(200):
            if out2.exists():
                break
            time.sleep(0.02)
        slots = _slots_on_cpu()
        with slots.place():
            holds = [slots.process(False), slots.process(True)]  # kept: a dropped one gives its hold back
            other = holds[0].__enter__()
            other.started(proc.pid)
            tuner = holds[1].__enter__()
            tuner.started(proc2.pid)
            assert tuner._held.alone and not _advancing(out)  # the tuner has its GPU alone: the other is paused
            tuner.go_shared()
            assert _advancing(out) and _advancing(out2)
            t0 = time.monotonic()
            with slots.hold(True):  # the next timing pauses both, at once
                assert time.monotonic() - t0 < 2
                assert not _advancing(out) and not _advancing(out2)
            assert _advancing(out) and _advancing(out2)
            holds[1].__exit__(None, None, None)
            holds[0].__exit__(None, None, None)
        assert slots._alone == [False] and slots._holders == [set()] and slots.pauses[0] == 3
    finally:
        os.killpg(proc2.pid, 9)
        proc2.wait()


def test_a_process_that_ends_while_paused_has_its_pause_in_its_record(counter):
    """A locked process's CPU runs on and may exit while paused: its record (read as it ends) has the pause up to
    then, and the later resume leaves nothing behind for another process that gets its pid."""
    proc, _ = counter
    slots = _slots_on_cpu()
    with slots.place():
        hold, held = _shared_hold(slots, proc.pid)
        with slots.hold(True):
            time.sleep(0.2)
            spans = held.pause_spans()
            assert len(spans) == 1 and spans[0][1] - spans[0][0] >= 0.2
        assert slots._pause_spans == {} and slots._paused_at == {}
        hold.__exit__(None, None, None)
