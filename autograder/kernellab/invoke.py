"""Call a learner's function and turn anything that goes wrong into one clear paragraph."""
from __future__ import annotations

import inspect
import re
import sysconfig
import traceback

import torch


_STDLIB = sysconfig.get_paths()["stdlib"].replace("\\", "/") + "/"  # functools' cached_property is no learner's line


def _student_frame(exc: BaseException) -> str:
    """'line 12 of your cell' for the deepest frame outside kernellab, torch and triton."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        f = fr.filename.replace("\\", "/")
        if any(p in f for p in ("/kernellab/", "/torch/", "/triton/", "site-packages")) or f.startswith(_STDLIB):
            continue
        return f" (raised at line {fr.lineno}: `{(fr.line or '').strip()}`)"
    return ""


def _static_assert(exc: BaseException) -> str | None:
    """For a failed ``tl.static_assert`` in the interpreter (an AssertionError raised by Triton's stand-in,
    wrapped in an InterpreterError whose text may be just "AssertionError('')"): where in the learner's
    kernel it failed, its source line and its message."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, AssertionError):
            frames = traceback.extract_tb(exc.__traceback__)
            for i, fr in enumerate(frames):
                if fr.name.endswith("static_assert") and i > 0:
                    kernel = frames[i - 1]
                    text = str(exc).strip()
                    return (f"tl.static_assert failed in your kernel at line {kernel.lineno}: "
                            f"`{(kernel.line or '').strip()}`" + (f": {text}" if text else ""))
        exc = exc.__cause__ or exc.__context__
    return None


_DTYPE = re.compile(r"Expected dtype \[([^\]]*)\] but got (\w+)")


def _dtype_error(exc: BaseException) -> str | None:
    """For a Triton math function given a dtype it does not take (``tl.sigmoid``, ``tl.exp``, ``tl.log``,
    ``tl.sqrt`` ... on fp16: "Expected dtype ['fp32', 'fp64'] but got fp16", from the interpreter wrapped twice in
    InterpreterError, from the GPU compiler inside a CompilationError): the kernel's line and the fix."""
    seen, line, found, compiled = set(), "", None, False
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        found = found or _DTYPE.search(str(exc))
        text = str(exc).splitlines()
        caret = [i for i, t in enumerate(text) if t.strip() == "^" and i > 0]
        if "CompilationError" in type(exc).__name__ and caret and not compiled:  # outermost: the learner's line
            line, compiled = f" (in the kernel: `{text[caret[0] - 1].strip()}`)", True
        elif not compiled:
            # in the interpreter the innermost exception that passed through the learner's code has the kernel line
            line = _student_frame(exc) or line
        exc = exc.__cause__ or exc.__context__
    if not found:
        return None
    wanted = ", ".join(w.strip(" '\"\\") for w in found[1].split(","))
    got = found[2]
    return (f"a Triton math function was given {got} values, and it computes only in {wanted}{line}. "
            f"tl.exp, tl.log, tl.sqrt, tl.sigmoid and their kin take no {got}: convert first "
            f"(x.to(tl.float32)), compute, and convert back when storing (y.to(out_ptr.dtype.element_ty)).")


class Refused(Exception):
    """Raised by a problem's own call hook when the learner's code runs but is not what the problem asks
    for; its message is the whole explanation."""


def describe_exception(exc: BaseException, call: str) -> str:
    if isinstance(exc, Refused):
        return f"{call}: {exc}"
    name = type(exc).__name__
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    where = _student_frame(exc)
    if isinstance(exc, NotImplementedError):
        return f"{call} is not written yet: it raised NotImplementedError. Replace the stub's body with your code."
    if isinstance(exc, TypeError) and ("argument" in first or "positional" in first):
        return (f"{call} could not be called the way the check calls it: {first}. "
                "Keep the signature from the stub.")
    if "OutOfResources" in name or "out of resource" in first.lower():
        return (f"The Triton kernel in {call} needs more on-chip resources than this GPU has ({first}). "
                "Use smaller blocks or fewer num_stages; when autotuning, include configurations that fit "
                "(kl.tuning.show_configs lists each one's shared memory; a T4 has 64 KB).")
    static = _static_assert(exc)
    if static:
        return f"{call}: {static}."
    dtype = _dtype_error(exc)
    if dtype:
        return f"{call}: {dtype}"
    if "CompilationError" in name or "CompileTimeAssertionFailure" in name:
        detail = " ".join(s.strip() for s in msg[-3:] if s.strip())
        return f"The Triton kernel in {call} did not compile: {detail[:400]}"
    if isinstance(exc, RuntimeError) and "active drivers" in first:
        return (f"{call} raised RuntimeError: {first.rstrip('.')}: triton.autotune benchmarks its "
                "configurations on a GPU, and the CPU interpreter has no GPU driver to time them with; here use kl.autotune (it runs the "
                "first configuration when interpreting) or launch the kernel with one configuration.")
    if isinstance(exc, RuntimeError) and ("CUDA error" in first or "illegal memory" in first.lower()):
        return (f"{call} caused a CUDA error: {first}. This usually means a load or store outside the "
                "tensors (check masks and offsets). CUDA errors are sticky: restart the kernel "
                "(Kernel > Restart) before running anything else on the GPU.")
    return f"{call} raised {name}: {first[:300]}{where}."


def signature_problem(fn, n_args: int, name: str, signature: str) -> str | None:
    """Say so if ``fn`` is missing, not callable, or cannot take ``n_args`` positional arguments."""
    if fn is None:
        return f"There is no function `{name}`: define `{signature}` in the exercise cell and run it."
    if not callable(fn):
        return f"`{name}` is a {type(fn).__name__}, not a function: define `{signature}`."
    try:
        inspect.signature(fn).bind(*([None] * n_args))
    except TypeError:
        return f"`{name}` must take {n_args} positional arguments: define it as `{signature}`."
    except ValueError:  # builtins without a signature: let the call decide
        return None
    return None


def sync(device) -> str | None:
    """Wait for the GPU; return a paragraph if an asynchronous error surfaced."""
    if str(device).startswith("cuda"):
        try:
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            return describe_exception(exc, "the kernel")
    return None
