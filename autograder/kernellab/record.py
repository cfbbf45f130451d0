"""Record what a graded call does, so that a judge can do it again without the learner's Python.

Inside a watched call (watch.py serves every allocation from a guarded buffer), a ``Recording``
captures each Triton launch - the compiled kernel (on a GPU: Triton's cache files for it; in the CPU
interpreter: its source and the globals it reads), the grid, every argument, and for each pointer the
buffer it points into and at what byte offset - plus the few torch calls a graded function may make
(allocations and how they start, ``zero_``, ``fill_`` with a number, ``clone``/``contiguous`` copies)
and which buffer views the call returned. Everything is plain data (``Recording.finish``) plus the
kernel files.

The record is a *claim*: it is made in the worker, where the learner's code can change anything. The
judge (replay.py) runs it on its own fresh inputs and checks and times that run; a record that leaves
out work, or bakes in numbers computed on the host, replays to a wrong answer.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import textwrap

import torch

from .compat import parse_python
from .invoke import Refused

# The most steps (launches, fill_/zero_ calls, copies, replayed ops) and buffers one graded call may take: no
# problem needs more, and a call that writes its output one torch call per element would run for minutes.
MAX_EVENTS = 2000
MAX_BUFFERS = 512
_STEPS = (f"too many separate steps to grade (over {MAX_EVENTS} kernel launches, fill_/zero_ calls and copies, or over "
          f"{MAX_BUFFERS} buffers): write each element with a kernel, not one torch call at a time")
TOO_MANY_STEPS = f"The call did {_STEPS}."


# Buffers a record may name: the call's inputs, what it allocated, and (for a problem whose call may use PyTorch
# ops, replayed by the judge under the problem's rule: op_rules.py) what those ops returned, in order.
INPUT, ALLOC, OP = "input", "alloc", "op"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def view_of(t: torch.Tensor, buf: int, base_ptr: int) -> dict:
    """A tensor as a view of buffer ``buf``: byte offset from the buffer's start, shape, strides, dtype."""
    return {"buf": buf, "offset": t.data_ptr() - base_ptr, "shape": list(t.shape), "strides": list(t.stride()),
            "dtype": dtype_name(t.dtype)}


def whole_storage(t: torch.Tensor) -> torch.Tensor:
    """A flat tensor of ``t``'s dtype over the whole of its storage, from its start (an op's result as a buffer)."""
    storage = t.untyped_storage()
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(storage, 0, (storage.nbytes() // t.element_size(),),
                                                               (1,))


@dataclasses.dataclass
class Buffer:
    kind: str  # INPUT, ALLOC or OP
    base: torch.Tensor  # the whole guarded storage (inputs: their guarded base)
    index: int = 0  # inputs: which argument
    fill: str = "poison"  # allocations: "poison" (NaN) or "zero"
    shape: tuple = ()
    strides: tuple = ()
    dtype: str = ""

    @property
    def start(self) -> int:
        return self.base.data_ptr()

    @property
    def nbytes(self) -> int:
        return self.base.numel() * self.base.element_size()

    def as_json(self) -> dict:
        if self.kind == INPUT:
            return {"kind": INPUT, "index": self.index}
        if self.kind == OP:  # made by a recorded op: the judge's buffer is what its own run of the op returns
            return {"kind": OP, "dtype": self.dtype}
        return {"kind": ALLOC, "fill": self.fill, "shape": list(self.shape), "strides": list(self.strides),
                "dtype": self.dtype}


class Recording:
    """Filled in during one call (``with recording(inputs) as rec``); then ``rec.finish(outputs)``."""

    def __init__(self, input_guards: list, ops: bool = False):
        self.buffers: list[Buffer] = [Buffer(INPUT, g.base, index=i) for i, g in enumerate(input_guards)
                                      if g is not None]
        self.ops = ops  # record PyTorch's compute ops too (``op``), for a judge that replays them
        self.events: list[dict] = []
        self.kernels: dict[str, dict] = {}  # kernel id -> how to rebuild it
        self.files: dict[str, str] = {}  # file name in the record folder -> path on this machine
        self.problem: str | None = None  # the first thing that cannot be replayed, said once
        self.benchmarking = 0  # >0 while an autotuner times its configurations (not part of the call)

    # -- buffers
    def add_alloc(self, guarded, zero: bool) -> None:
        self.buffers.append(Buffer(ALLOC, guarded.base, fill="zero" if zero else "poison",
                                   shape=tuple(guarded.view.shape), strides=tuple(guarded.view.stride()),
                                   dtype=dtype_name(guarded.view.dtype)))

    def locate(self, ptr: int, end_ok: bool = True) -> tuple[int, int] | None:
        """(buffer index, byte offset) of an address inside a known buffer, or None."""
        # Strictly inside first: on a GPU the caching allocator packs buffers end to end, so the end of one
        # is often the start of the next. The end itself only for a pointer no buffer holds (an empty view),
        # and never for an op's result (new memory just past a buffer is not that buffer: ``op``).
        for strict in (True, False) if end_ok else (True,):
            for i, b in enumerate(self.buffers):
                if b.start <= ptr < b.start + b.nbytes or (not strict and ptr == b.start + b.nbytes):
                    return i, ptr - b.start
        return None

    def view(self, t: torch.Tensor, what: str) -> dict | None:
        hit = self.locate(t.data_ptr())
        if hit is None:
            self.refuse(f"{what} is memory that is neither an input nor allocated during the call")
            return None
        return view_of(t, hit[0], self.buffers[hit[0]].start)

    def refuse(self, why: str) -> None:
        if self.problem is None:
            self.problem = why

    def _add(self, event: dict) -> None:
        """Record one step; past MAX_EVENTS stop the call there (Refused), rather than record steps the judge
        refuses anyway while the call burns its budget. The record keeps the refusal even if the learner's code
        catches the exception and goes on."""
        if len(self.events) >= MAX_EVENTS:  # the step is not taken: the mode raises before running it
            self.refuse(f"it did {_STEPS}")
            raise Refused(TOO_MANY_STEPS)
        self.events.append(event)

    # -- torch calls (from watch.py's dispatch mode)
    def torch_call(self, op: str, args: tuple, kwargs: dict, out) -> None:
        """The allowed torch calls that change memory: zero_, fill_ with a number, clone/contiguous."""
        if self.benchmarking:
            return
        if op == "zero_":
            v = self.view(args[0], "the tensor zeroed with zero_()")
            if v is not None:
                self._add({"op": "zero", "view": v})
        elif op == "fill_":
            value = args[1] if len(args) > 1 else kwargs.get("value")
            if isinstance(value, torch.Tensor):
                # `c[lo:hi] = 0` reaches fill_ with a one-element tensor holding the number: record the number
                # (like any fill, it is replayed as that constant, whatever the judge's inputs are).
                if value.numel() != 1:
                    self.refuse("fill_ with a tensor value is not a graded function's business")
                    return
                value = value.item()
            v = self.view(args[0], "the tensor filled with fill_()")
            if v is not None:
                self._add({"op": "fill", "view": v, "value": float(value)})
        elif op == "copy":
            src, dst = self.view(args[0], "the tensor copied"), self.view(out, "a copy's destination")
            if src is not None and dst is not None:
                self._add({"op": "copy", "src": src, "dst": dst})

    # -- PyTorch compute ops (problems whose call may use them: record.ops)
    def op(self, func, args: tuple, kwargs: dict, out) -> None:
        """A compute op and what it returned. Its tensors are views of known buffers; a result in memory no buffer
        holds is a new one (every buffer's storage is kept alive until the record is done, so new memory is
        never an old buffer's). The judge replays it only if the problem's rule allows that op there."""
        if self.benchmarking:
            return
        event = {"op": "aten", "name": str(func), "args": self._encode(args, str(func)),
                 "kwargs": self._encode(kwargs, str(func)), "out": []}
        results = out if isinstance(out, (tuple, list)) else (out,)
        for t in results:
            if not isinstance(t, torch.Tensor):
                event["out"].append(None)
                continue
            hit = self.locate(t.data_ptr(), end_ok=False) if t.numel() else None
            if hit is None:
                self.buffers.append(Buffer(OP, whole_storage(t), dtype=dtype_name(t.dtype)))
                new = len(self.buffers) - 1
                event["out"].append({"new": new, "view": view_of(t, new, self.buffers[new].start)})
            else:
                event["out"].append({"view": view_of(t, hit[0], self.buffers[hit[0]].start)})
        self._add(event)

    def _encode(self, value, what: str):
        """An op's argument as plain data: tensors as views of buffers, numbers, lists, dtypes; anything else
        cannot be replayed."""
        if isinstance(value, torch.Tensor):
            v = self.view(value, f"a tensor passed to {what}")
            return {"t": v} if v is not None else {"v": None}
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"v": value}
        if isinstance(value, (list, tuple)):
            return {"l": [self._encode(x, what) for x in value]}
        if isinstance(value, dict):
            return {"d": {str(k): self._encode(x, what) for k, x in value.items()}}
        if isinstance(value, torch.dtype):
            return {"dtype": dtype_name(value)}
        if isinstance(value, torch.device):
            return {"device": True}  # the judge's own
        if isinstance(value, (torch.memory_format, torch.layout)):
            return {"torch": str(value).replace("torch.", "")}
        self.refuse(f"{what} was given a {type(value).__name__}, which cannot be replayed")
        return {"v": None}

    # -- launches
    def launch(self, kernel_id: str, grid, args: list) -> None:
        if self.benchmarking:
            return
        g = [int(x) for x in (tuple(grid) + (1, 1, 1))[:3]]
        self._add({"op": "launch", "kernel": kernel_id, "grid": g, "args": args})

    def arg(self, value, name: str, pointer: bool | None = None) -> dict:
        """One launch argument as plain data."""
        if value is None:
            return {"none": True}
        if pointer or (pointer is None and hasattr(value, "data_ptr")):
            ptr = value.data_ptr() if hasattr(value, "data_ptr") else int(value)
            hit = self.locate(ptr)
            if hit is None:
                self.refuse(f"the kernel argument `{name}` points to memory that is neither an input nor "
                            "allocated during the call (a buffer made before the call, or by a torch op?)")
                return {"none": True}
            dt = dtype_name(value.dtype) if hasattr(value, "dtype") else ""
            # Triton specialises a kernel on 16-byte aligned pointers: the judge's must be aligned alike.
            return {"ptr": list(hit), "dtype": dt, "a16": ptr % 16 == 0}
        if isinstance(value, bool):
            return {"value": value}
        if isinstance(value, (int, float, str)):
            return {"value": value}
        const = constant_value(value)
        if const is not _NOT_CONSTANT:
            return {"const": const}
        self.refuse(f"the kernel argument `{name}` is a {type(value).__name__}, which cannot be replayed")
        return {"none": True}

    def finish(self, out) -> dict:
        """The record of a call that returned ``out`` (a tensor, or a tuple of them), as plain data; its
        "_files" (kernel file name -> local path) are for the worker to copy next to its result."""
        several = isinstance(out, (tuple, list))
        outs = [self.view(o, "a returned tensor") for o in (out if several else (out,))]
        return {"buffers": [b.as_json() for b in self.buffers], "events": self.events, "outputs": outs,
                "kernels": self.kernels, "problem": self.problem, "tuple": several, "_files": dict(self.files)}


_NOT_CONSTANT = object()


def constant_value(v):
    """A constexpr-like value as JSON (numbers, strings, Triton dtypes), or _NOT_CONSTANT."""
    import triton.language as tl
    if isinstance(v, tl.constexpr):
        v = v.value
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, tl.dtype):
        return {"tl_dtype": str(v)}
    return _NOT_CONSTANT


# ---------------------------------------------------------------- capturing kernels

def gpu_kernel_entry(rec: Recording, kernel) -> str:
    """A compiled kernel (triton.compiler.CompiledKernel) as a record entry; its files join the record."""
    kid = f"k{kernel.hash[:24]}"
    if kid in rec.kernels:
        return kid
    src = kernel.src
    arg_names = list(src.fn.arg_names)
    signature = {str(k): v for k, v in src.signature.items()}
    files = {}
    for fname, path in kernel.metadata_group.items():
        if fname.endswith(".json") and not fname.startswith("__grp__") or fname.endswith(".cubin") \
                or fname.endswith(".hsaco"):
            local = f"{kid}__{fname}"
            rec.files[local] = path
            files[fname] = local
    constants = []
    for k, v in getattr(src, "constants", {}).items():
        c = constant_value(v)
        constants.append([list(k) if isinstance(k, tuple) else k, None if c is _NOT_CONSTANT else c])
    rec.kernels[kid] = {"kind": "binary", "name": kernel.name, "hash": kernel.hash, "arg_names": arg_names,
                        "signature": _jsonable_signature(signature), "constants": constants, "files": files}
    return kid


def _jsonable_signature(sig: dict) -> dict:
    def conv(v):
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        return v
    return {k: conv(v) for k, v in sig.items()}


def interpreted_kernel_entry(rec: Recording, fn) -> str:
    """A kernel run by the interpreter, as its source and the globals it reads (other kernels too)."""
    py = getattr(fn, "fn", fn)
    kid = f"src_{py.__name__}_{id(py):x}"
    if kid in rec.kernels:
        return kid
    rec.kernels[kid] = {}  # placeholder: a kernel that calls itself does not recurse here
    try:
        source = textwrap.dedent(inspect.getsource(py))
    except (OSError, TypeError):
        rec.refuse(f"the source of the kernel `{py.__name__}` cannot be read")
        rec.kernels[kid] = {"kind": "source", "name": py.__name__, "source": "", "globals": {}}
        return kid
    names = free_names(source)
    globs, kernels = {}, {}
    g = getattr(py, "__globals__", {})
    import builtins
    for name in sorted(names):
        if name in g:
            value = g[name]
        elif hasattr(builtins, name):
            continue  # the judge allows a few builtins (range, min, ...) and refuses the rest
        else:
            continue  # undefined: fails in the judge as it would in the compiler
        if _is_kernel(value):
            kernels[name] = interpreted_kernel_entry(rec, value)
        elif inspect.ismodule(value):
            globs[name] = {"module": value.__name__}
        else:
            c = constant_value(value)
            globs[name] = {"const": c} if c is not _NOT_CONSTANT else {"other": type(value).__name__}
    rec.kernels[kid] = {"kind": "source", "name": py.__name__, "source": source, "globals": globs,
                        "kernels": kernels}
    return kid


def _is_kernel(value) -> bool:
    from triton.runtime.jit import JITFunction
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover
        InterpretedFunction = JITFunction
    return isinstance(value, (JITFunction, InterpretedFunction))


def free_names(source: str) -> set:
    """Names a function's body reads that it does not bind itself (parameters, assignments, loops)."""
    tree = parse_python(source)
    fn = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    fn.decorator_list = []  # the decorators ran in the worker; the judge applies triton.jit itself
    bound = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    loads = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            else:
                loads.add(node.id)
    # default values and decorators are evaluated outside the body but still read globals
    return loads - bound


# ---------------------------------------------------------------- hooks

_ACTIVE: list = []  # the Recording of the call being recorded, if any


def active() -> Recording | None:
    return _ACTIVE[-1] if _ACTIVE else None


def _hook_targets():
    """(class, attribute, wrapper factory) for the places launches go through."""
    from triton.runtime import autotuner
    targets = [(autotuner.Autotuner, "_bench", _wrap_bench)]
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        from triton.runtime.interpreter import InterpretedFunction
        targets.append((InterpretedFunction, "run", _wrap_interpreted_run))
    else:
        from triton.compiler.compiler import CompiledKernel
        targets.append((CompiledKernel, "run", _wrap_compiled_run))
    return targets


def _wrap_bench(original):
    def _bench(self, *args, **kwargs):
        rec = active()
        if rec is not None:
            rec.benchmarking += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            if rec is not None:
                rec.benchmarking -= 1
    return _bench


def _wrap_interpreted_run(original):
    def run(self, *args, grid, warmup, **kwargs):
        rec = active()
        if rec is None or warmup or rec.benchmarking:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        names = list(self.arg_names)
        spec = inspect.getfullargspec(self.fn)
        passed = dict(zip(names, args))
        passed.update({k: v for k, v in kwargs.items() if k in spec.args or k in spec.kwonlyargs})
        kid = interpreted_kernel_entry(rec, self)
        recorded = {name: rec.arg(value, name) for name, value in passed.items()}
        seen = {}
        if callable(grid):
            user_grid = grid

            def grid(meta):
                seen["grid"] = tuple(user_grid(meta))
                return seen["grid"]
        else:
            seen["grid"] = tuple(grid)
        out = original(self, *args, grid=grid, warmup=warmup, **kwargs)
        rec.launch(kid, seen.get("grid", (0,)), [[k, v] for k, v in recorded.items()])
        return out
    return run


def _wrap_compiled_run(original_property):
    getter = original_property.fget

    def run(self):
        launcher = getter(self)
        rec = active()
        if rec is None:
            return launcher

        def launch(gx, gy, gz, stream, function, packed, launch_meta, enter, exit_, *args):
            r = active()
            if r is not None and not r.benchmarking:
                kid = gpu_kernel_entry(r, self)
                sig = list(self.src.signature.values())
                names = list(self.src.fn.arg_names)
                recorded = [r.arg(a, n, pointer=isinstance(t, str) and t.startswith("*"))
                            for a, n, t in zip(args, names, sig)]
                r.launch(kid, (gx, gy, gz), recorded)
            return launcher(gx, gy, gz, stream, function, packed, launch_meta, enter, exit_, *args)
        return launch
    return property(run)


class recording:
    """``with recording(input_guards) as rec:`` around one call (inside ``watched()``); ``ops``: record PyTorch's
    compute ops too (a problem the judge replays under an op rule)."""

    def __init__(self, input_guards: list, ops: bool = False):
        self.rec = Recording(input_guards, ops)
        self.saved = []

    def __enter__(self) -> Recording:
        _ACTIVE.append(self.rec)
        for cls, attr, factory in _hook_targets():
            original = cls.__dict__.get(attr)
            if original is None:
                continue
            self.saved.append((cls, attr, original))
            setattr(cls, attr, factory(original))
        return self.rec

    def __exit__(self, *exc) -> None:
        for cls, attr, original in reversed(self.saved):
            setattr(cls, attr, original)
        _ACTIVE.remove(self.rec)


__all__ = ["ALLOC", "INPUT", "OP", "Recording", "active", "constant_value", "free_names", "recording",
           "whole_storage"]
