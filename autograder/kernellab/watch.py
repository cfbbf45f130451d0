"""Watch a call to a learner's function: which torch ops it runs, what it allocates, how many
Triton kernels it launches.

Allocation ops (empty, empty_like, zeros, ...) are served from guarded, NaN-filled buffers
(see guarded.py) however the learner spells them. Compute ops are recorded: the graded
function must compute with Triton (or, where a problem allows some, within its rule: those ops go into the
call's record too, for the judge to check and do again; op_rules.py). Work inside a Triton launch (the interpreter copies
tensors around) and inside autotuning is not the learner's torch use and is not recorded.
"""
from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from . import record
from .guarded import Guarded

aten = torch.ops.aten

_ALLOC_EMPTY = {aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided}
_ALLOC_ZERO = {aten.zeros, aten.zeros_like, aten.new_zeros}
# Views, shape queries and layout changes: allowed in a graded function (GRADING.md policy).
_ALLOWED = {
    aten.view, aten._unsafe_view, aten.reshape, aten.as_strided, aten.t, aten.transpose, aten.permute,
    aten.expand, aten.slice, aten.select, aten.unsqueeze, aten.squeeze, aten.flatten, aten.unflatten,
    aten.detach, aten.alias, aten.clone, aten.contiguous, aten.zero_, aten.fill_, aten.lift_fresh,
    aten.split, aten.chunk, aten.unbind, aten.view_as, aten.narrow, aten.movedim, aten.sym_size,
    aten.sym_stride, aten.sym_numel, aten.is_contiguous, aten.stride, aten.size, aten.numel,
    aten._local_scalar_dense, aten.is_same_size, aten.dim,
}


# In-place torch calls a graded function may make; a recording keeps them (record.py).
_MUTATE = {aten.zero_: "zero_", aten.fill_: "fill_"}


class WatchState:
    def __init__(self):
        self.launches = 0
        self.torch_ops: list[str] = []
        self.allocations: list[Guarded] = []
        self.quiet = 0  # >0 while inside a Triton launch or autotuning
        self.launching = 0  # >0 inside a Triton launch itself (the interpreter's own copies are not the call's)
        # None: every torch compute op counts against the call (lessons 01-05). A set: only these ops
        # count, the rest may stay in PyTorch (lesson 06 keeps the matmuls with cuBLAS). See ``policy``.
        self.deny: frozenset | None = None
        self.deny_why = ""
        self.ops_why = ""  # the rule in force when the first refused op ran, said with the refusal
        self.fake_mismatch: str | None = None  # the first custom op whose fake disagreed with its real outputs

    def counts(self, pkt) -> bool:
        return pkt not in _ALLOWED and (self.deny is None or pkt in self.deny)

    def misuse(self, call: str) -> str | None:
        """Why the watched call does not count as a Triton kernel, or None if it does."""
        if self.torch_ops and self.ops_why:
            ops = ", ".join(sorted(set(self.torch_ops))[:4])
            return f"{call} computed with PyTorch ({ops}). {self.ops_why}"
        if self.torch_ops:
            ops = ", ".join(sorted(set(self.torch_ops))[:4])
            return (f"{call} computed with PyTorch ({ops}). A graded function must do its arithmetic in a "
                    "Triton kernel; it may only allocate (torch.empty, empty_like, zeros), reshape and take views.")
        if self.launches == 0:
            return f"{call} launched no Triton kernel. Launch yours with kernel[grid](...)."
        return None

    def owns(self, t: torch.Tensor) -> Guarded | None:
        """The guarded allocation that ``t`` is a view of, if it was allocated during the call."""
        ptr = t.untyped_storage().data_ptr()
        for g in self.allocations:
            if g.base.untyped_storage().data_ptr() == ptr:
                return g
        return None


class _Watcher(TorchDispatchMode):
    def __init__(self, state: WatchState):
        super().__init__()
        self.state = state

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        pkt = func.overloadpacket
        rec = record.active()
        if self.state.quiet:
            # An autotuner's reset_to_zero (outside the launch itself) is part of what the call does.
            if rec is not None and not self.state.launching and pkt in _MUTATE:
                rec.torch_call(_MUTATE[pkt], args, kwargs, None)
            return func(*args, **kwargs)
        body = custom_op_body(func, args)
        if body is not None:
            # A torch.library.custom_op defined in Python: its body is the learner's code, and the mode would not
            # see inside it (a dispatch mode is off while it handles an op). Run the body itself, watched.
            with self:
                out = body(*args, **kwargs)
            if self.state.fake_mismatch is None:
                self.state.fake_mismatch = fake_differs(func, args, kwargs, out)
            return out
        if pkt in _ALLOC_EMPTY or pkt in _ALLOC_ZERO:
            out = func(*args, **kwargs)  # a real tensor of the right metadata; we replace its storage
            if not isinstance(out, torch.Tensor) or out.numel() == 0:
                return out
            g = Guarded(out.shape, out.dtype, out.device, strides=out.stride())
            if pkt in _ALLOC_ZERO:
                g.view.zero_()
            self.state.allocations.append(g)
            if rec is not None:
                rec.add_alloc(g, zero=pkt in _ALLOC_ZERO)
            return g.view
        if rec is not None and pkt is aten.clone:
            # A copy (clone, contiguous) lands in a guarded buffer too, so that a replay can make it again.
            out = func(*args, **kwargs)
            g = Guarded(out.shape, out.dtype, out.device, strides=out.stride())
            g.view.copy_(out)
            self.state.allocations.append(g)
            rec.add_alloc(g, zero=False)
            rec.torch_call("copy", args, kwargs, g.view)
            return g.view
        if rec is not None and pkt in _MUTATE:
            rec.torch_call(_MUTATE[pkt], args, kwargs, None)
        if self.state.counts(pkt):
            if not self.state.torch_ops:
                self.state.ops_why = self.state.deny_why
            self.state.torch_ops.append(str(pkt).replace("aten.", "torch."))
        out = func(*args, **kwargs)
        if rec is not None and rec.ops and pkt not in _ALLOWED:
            rec.op(func, args, kwargs, out)
        return out


def custom_op_body(func, args=()):
    """The Python body of a ``torch.library.custom_op`` (or ``triton_op``) that ``func`` (an OpOverload) calls,
    for the device of its first tensor argument; None for PyTorch's own ops and ops made otherwise."""
    name = getattr(getattr(func, "_schema", None), "name", "")
    if not name or name.split("::")[0] in ("aten", "prim", "prims", "_c10d_functional", "higher_order"):
        return None
    from torch._library.custom_ops import OPDEFS
    opdef = OPDEFS.get(name)
    if opdef is None:
        return None
    device = next((a.device.type for a in args if isinstance(a, torch.Tensor)), "cpu")
    return getattr(opdef, "_backend_fns", {}).get(device) or opdef._init_fn


def _layout(t) -> tuple:
    """What code compiled around an op relies on: shape, dtype, and the strides of dimensions longer than 1."""
    return tuple(t.shape), t.dtype, tuple(st for st, n in zip(t.stride(), t.shape) if n > 1)


def fake_differs(func, args, kwargs, out) -> str | None:
    """Why the fake implementation of the custom op ``func`` does not describe ``out``, what its body returned for
    ``args`` (shapes, dtypes, strides), or None. torch.compile plans the code after an op from its fake: a fake
    whose strides differ from the real output's makes that code read the output wrongly, or fail on a GPU only."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._pytree import tree_flatten, tree_map

    real = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    try:
        with _disable_current_modes(), FakeTensorMode(allow_non_fake_inputs=False) as mode:
            fargs, fkwargs = tree_map(lambda a: mode.from_tensor(a) if isinstance(a, torch.Tensor) else a,
                                      (args, kwargs))
            fake = [t for t in tree_flatten(func(*fargs, **fkwargs))[0] if isinstance(t, torch.Tensor)]
    except Exception:  # noqa: BLE001 - no fake, or one that fails: torch.compile says so itself
        return None
    name = func._schema.name if hasattr(func, "_schema") else str(func)
    if len(fake) != len(real):
        return f"`{name}` returned {len(real)} tensors where its fake implementation returns {len(fake)}."
    for i, (r, f) in enumerate(zip(real, fake)):
        if _layout(r) != _layout(f):
            which = f"output {i}" if len(real) > 1 else "its output"
            return (f"`{name}`'s fake implementation does not describe {which}: the op returned shape "
                    f"{tuple(r.shape)}, {r.dtype}, strides {tuple(r.stride())}; the fake says shape {tuple(f.shape)}, "
                    f"{f.dtype}, strides {tuple(f.stride())}. torch.compile plans the code after the op from the fake, "
                    "so that code would read the output wrongly: make register_fake return tensors laid out as the "
                    "op's are (for a transposed output, e.g. q.new_empty((B, N, H, D)).transpose(1, 2)).")
    return None


def _quiet_wrapper(state: WatchState, original, count: bool):
    """``count``: a launch (JITFunction/InterpretedFunction.run); else an autotuner or heuristics around one.
    Inside a launch no torch call is the learner's; inside an autotuner its reset_to_zero still is."""
    def run(*args, **kwargs):
        if count:  # counted even inside autotuning: its chosen config launches through here too
            state.launches += 1
        state.quiet += 1
        state.launching += count
        try:
            if not count:
                return original(*args, **kwargs)
            with _disable_current_modes():
                return original(*args, **kwargs)
        finally:
            state.quiet -= 1
            state.launching -= count
    return run


def launch_targets():
    """(class, attribute, counts-as-a-launch) for every way a Triton kernel gets run."""
    targets = []
    from triton.runtime import jit as _jit
    targets.append((_jit.JITFunction, "run", True))
    try:
        from triton.runtime import interpreter as _interp
        targets.append((_interp.InterpretedFunction, "run", True))
    except Exception:  # pragma: no cover - very old triton
        pass
    from triton.runtime import autotuner as _at
    targets.append((_at.Autotuner, "run", False))
    if hasattr(_at, "Heuristics"):
        targets.append((_at.Heuristics, "run", False))
    return targets


_CURRENT: list = []  # the WatchState of the call being watched, if any


def current() -> WatchState | None:
    return _CURRENT[-1] if _CURRENT else None


@contextlib.contextmanager
def policy(deny, why: str):
    """Inside a watched call: from here on only ``deny`` ops count as misuse (None: all of them).
    A problem's own call hook uses it to allow cuBLAS in one phase and not in another. Outside a
    watched call (timed runs) it does nothing."""
    st = current()
    if st is None:
        yield
        return
    saved = st.deny, st.deny_why
    st.deny, st.deny_why = (frozenset(deny) if deny is not None else None), why
    try:
        yield
    finally:
        st.deny, st.deny_why = saved


def warm_up() -> None:
    """Enter a dispatch mode once, on nothing: the first one a process enters imports torch._dynamo (1.2 s on an
    idle CPU here, seconds on a class's busy one). A speed problem's worker calls this while it loads, beside
    other work; else its recorded call pays it after its tuning, while timed processes wait on that GPU. Forked
    from a zygote, it finds this done (grading/processes/zygote.py enters one before any fork) and costs nothing."""
    with _Watcher(WatchState()):
        torch.empty(0)


@contextlib.contextmanager
def watched():
    """Context for one checked call; yields the WatchState filled in during the call."""
    state = WatchState()
    _CURRENT.append(state)
    saved = []
    for cls, attr, count in launch_targets():
        original = cls.__dict__.get(attr)
        if original is None:
            continue
        saved.append((cls, attr, original))
        setattr(cls, attr, _quiet_wrapper(state, original, count))
    try:
        with _Watcher(state):
            yield state
    finally:
        _CURRENT.remove(state)
        for cls, attr, original in saved:
            setattr(cls, attr, original)


__all__ = ["WatchState", "current", "custom_op_body", "fake_differs", "launch_targets", "policy", "warm_up",
           "watched"]
