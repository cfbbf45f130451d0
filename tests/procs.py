"""Process checks the tests share: is a pid still running, and wait for it to go."""
import time

from kernellab.grading.classroom.pause import run_state


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, counts as gone)."""
    return run_state(pid) not in ("", "Z")


def gone(pid: int, timeout: float = 10.0) -> bool:
    """Wait up to ``timeout`` seconds for ``pid`` to stop; whether it did."""
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)
