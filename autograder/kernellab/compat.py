"""Small fixes for older Triton releases that the course still supports (torch >= 2.5 ships Triton 3.1+)."""
from __future__ import annotations

import inspect
import threading


def patch_interpreter_index() -> bool:
    """Triton's interpreter before 3.7 turns a scalar tensor into a Python int with ``int(array)``, which
    NumPy 2 refuses for a one-element 1-D array: ``range(0, n_cols, BLOCK)`` over a kernel argument then
    fails with "only 0-dimensional arrays can be converted to Python scalars". Newer Triton squeezes the
    array first; do the same. Returns True when the patch was applied."""
    try:
        from triton.runtime import interpreter as interp
    except ImportError:
        return False
    original = getattr(interp, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_kernellab", False):
        return False
    try:
        needed = "int(self.handle.data))" in inspect.getsource(original)
    except (OSError, TypeError):
        return False
    if not needed:
        return False

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
    patched._kernellab = True
    interp._patch_lang_tensor = patched
    return True


def patch_interpreter_autotune() -> bool:
    """The stock ``triton.autotune`` with several configurations benchmarks them on its first call, and
    benchmarking needs a GPU driver: in the CPU interpreter it fails with "0 active drivers". When the
    interpreter is on, run with the first configuration instead, as ``kl.autotune`` does, without
    benchmarking and without printing. A GPU run is untouched. Returns True when the patch was applied."""
    import os

    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    original = Autotuner.run
    if getattr(original, "_kernellab", False):
        return False

    def run(self, *args, **kwargs):
        configs = self.configs
        if len(configs) <= 1 or os.environ.get("TRITON_INTERPRET", "0").lower() not in ("1", "true", "on", "yes"):
            return original(self, *args, **kwargs)
        self.configs = configs[:1]  # Autotuner.run's single-config path: no benchmark, no driver
        try:
            return original(self, *args, **kwargs)
        finally:
            self.configs = configs
    run._kernellab = True
    run._original = original  # the autotuner as on a GPU (a test's way past this patch)
    Autotuner.run = run
    return True


class _NoChanges:
    def restore(self) -> None:
        pass


def patch_interpreter_device_calls() -> bool:
    """Triton's interpreter patches triton.language again (``inspect.getmembers`` over its modules) on every call
    of one ``@triton.jit`` function from another, once per program of the grid, and drops what that patch would
    undo: inside a launch, whose own patch already covers the modules the called function sees, it changes
    nothing. It was a fifth of the CPU time of grading lesson 04 (helpers called from the kernel in every
    program). Skip it there; a call outside a launch, or the first one in a launch that sees a module not yet
    patched in it (``tl.sum`` and ``tl.max`` are jit functions that see ``triton.language.core``), is patched as
    Triton does. Returns True when the patch was applied."""
    try:
        from triton.runtime import interpreter as interp
    except ImportError:
        return False
    original = getattr(interp, "_patch_lang", None)
    executor = getattr(interp, "GridExecutor", None)
    if original is None or executor is None or getattr(original, "_kernellab", False):
        return False
    try:
        returns_scope = "return scope" in inspect.getsource(original)
    except (OSError, TypeError):
        return False
    if not returns_scope:  # older interpreters patch and unpatch differently: leave them alone
        return False
    lang_modules = (interp.tl, interp.tl.core)
    launches = []  # per running launch: [the modules its patch covers, whether it has patched yet]

    def langs_of(fn) -> set:
        return {id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in lang_modules}

    def patch_lang(fn):
        langs = langs_of(fn)
        if launches and launches[-1][1] and langs <= launches[-1][0]:
            return _NoChanges()
        scope = original(fn)
        if launches:  # what a device call patches stays patched until the launch restores its own changes
            launches[-1][0] |= langs
            launches[-1][1] = True
        return scope

    run_grid = executor.__call__

    def call(self, *args, **kwargs):
        launches.append([langs_of(self.fn), False])
        try:
            return run_grid(self, *args, **kwargs)
        finally:
            launches.pop()
    patch_lang._kernellab = True
    interp._patch_lang = patch_lang
    executor.__call__ = call
    return True


def patch_interpreter_overflow_checks(builder=None) -> bool:
    """The interpreter checks every 32-bit integer add, subtract and multiply for overflow (two casts, the
    operation again in 64 bits, two comparisons) and hands the result to ``device_assert``, which drops it
    unless the interpreter's ``debug`` option is on, and it is off by default: the work changes nothing. Skip
    it while ``debug`` is off: grading lessons 04 and 05 on 2 CPU cores took 10-16 % less. Returns True when
    the interpreter's options were changed."""
    import dataclasses

    if builder is None:
        try:
            from triton.runtime import interpreter as interp
        except ImportError:
            return False
        builder = getattr(interp, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or getattr(options, "debug", True) or not getattr(options, "sanitize_overflow", False):
        return False
    builder.options = dataclasses.replace(options, sanitize_overflow=False)
    return True


def _scratch(size: int, alignment: int, stream):
    import torch
    return torch.empty(size, dtype=torch.int8, device="cuda")


def ensure_triton_allocator() -> bool:
    """A kernel that builds TMA descriptors on the device (``tl.make_tensor_descriptor``) needs a little global
    scratch memory per program, which Triton asks ``triton.set_allocator``'s function for at launch. Set one
    that takes it from PyTorch's caching allocator, unless the code already set its own. Triton keeps it in a
    context variable: call this in the thread that launches. Returns True when it was set here."""
    try:
        from triton.runtime import _allocation
    except ImportError:  # Triton before 3.3 has no device-side descriptors
        return False
    if not isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        return False
    _allocation.set_allocator(_scratch)
    return True


_PARSE_LOCK = threading.Lock()


def parse_python(source: str):
    """``ast.parse`` one thread at a time. CPython 3.11.7 (CI's) can raise "SystemError: AST constructor recursion
    depth mismatch" when two threads build AST objects at once; a regrade's thread pool parses notebooks in
    parallel, and a clean-clone run failed so on 2026-11-26."""
    import ast  # here: compat is imported by everything, ast by few
    with _PARSE_LOCK:
        return ast.parse(source)
