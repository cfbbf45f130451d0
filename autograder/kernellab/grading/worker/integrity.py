"""The child's guard on its own code: learner code runs in the same process as the trusted checks, so the
child notes which functions its checks depend on before loading that code and verifies they are the same
objects after loading and after the graded run. It also refuses new Python threads: PyTorch's op watch
sees only the thread it was entered on.
"""
from __future__ import annotations

import sys

# Modules whose functions and classes the checks call (or a learner could swap to fake them).
_MODULES = ("kernellab", "torch", "torch.utils._python_dispatch", "torch.cuda", "triton", "triton.runtime",
            "threading", "_thread", "math", "time")


def _watched_modules():
    for name, mod in list(sys.modules.items()):
        if mod is not None and (name in _MODULES or name.startswith(("kernellab.", "triton.runtime."))):
            yield name, mod


def _classes():
    """Classes whose methods the checks call or patch themselves (the launch hooks)."""
    import threading

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from kernellab.watch import launch_targets
    return [threading.Thread, TorchDispatchMode, torch.cuda.Event] + [cls for cls, _, _ in launch_targets()]


class Snapshot:
    def __init__(self):
        self.entries = {}
        for name, mod in _watched_modules():
            for key, value in list(vars(mod).items()):
                if callable(value) or type(value).__name__ == "module":
                    self.entries[(name, key)] = value
        for cls in _classes():
            for key, value in list(vars(cls).items()):
                self.entries[(cls.__qualname__, key)] = value

    def changed(self) -> list[str]:
        """Names (module.attribute) whose object is not the one seen at the snapshot."""
        now = {}
        for name, mod in _watched_modules():
            now[name] = vars(mod)
        for cls in _classes():
            now[cls.__qualname__] = vars(cls)
        out = []
        for (where, key), value in self.entries.items():
            space = now.get(where)
            new = space.get(key, value) if space is not None else value
            if new is not value and not _torch_rewrap(new, value):
                out.append(f"{where}.{key}")
        return out


def _torch_rewrap(new, old) -> bool:
    """PyTorch's compiler, on its first import, wraps a few torch functions (torch.manual_seed ...) in place."""
    code = getattr(new, "__code__", None)
    return getattr(new, "__wrapped__", None) is old and code is not None and ("_dynamo" in code.co_filename or code.co_filename.endswith("torch/_compile.py"))


def refuse_threads():
    """From here on, starting a Python thread raises: work on another thread escapes the op watch. Returns the
    grading's own way to start one, ``start(target) -> thread`` (compile_ahead's compiling threads), which the
    caller keeps out of the learner's namespace."""
    import _thread
    import threading
    start = threading.Thread.start

    def trusted(target):
        thread = threading.Thread(target=target, daemon=True)
        start(thread)
        return thread

    def refused(*args, **kwargs):
        raise RuntimeError("graded code may not start threads: a kernel exercise runs its work in Triton kernels "
                           "on the calling thread")
    threading.Thread.start = refused
    _thread.start_new_thread = refused
    if hasattr(_thread, "start_joinable_thread"):
        _thread.start_joinable_thread = refused
    return trusted


def tampered_message(names: list[str]) -> str:
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return (f"Your code replaced functions the grader relies on ({shown}). Graded code may not change "
            "library or grader code; this problem scores 0.")
