"""Launching a Triton kernel with less host time: ``kl.fast(kernel)[grid](*args, **kwargs)``.

``kernel[grid](...)`` does a lot of Python on every call before the GPU gets anything: binding and specialising
every argument, the compile-cache key, the used-globals check, the autotuner's key and dictionaries, launch
metadata. On an H100's host that came to tens of microseconds a launch, more than many kernels take on the GPU
(assets/bench/lesson07_step_host.md). ``fast(kernel)`` does the first call for each *specialisation* through
Triton as usual (it compiles, autotunes, checks), keeps the compiled kernel it returns and, from then on, for a
call that specialises the same way, calls that compiled kernel's launcher directly - the same launcher, with the
same arguments, that Triton itself calls last.

What decides "specialises the same way" is at least as fine as what Triton specialises on (the key below): each
integer by its value (Triton looks at its equality to 1, divisibility by 16 and width), each tensor's dtype and
16-byte alignment, every keyword (constexprs, num_warps) by value, the current device, and, for an autotuned kernel, the values of its key arguments plus the
configuration its autotuner holds for them (checked on every call: when the autotuner forgets its pick, e.g. after
``tuning.compile_only``, the next call goes through it again). Anything else takes Triton's own path every time:
the CPU interpreter, a launch hook (a profiler), the course's watch or recording of a call (they see every launch
as Triton makes it), anything that has replaced Triton's ``JITFunction.run`` or ``Autotuner.run`` (the grading
worker's compile-ahead pass turns launches into compile requests that way), an argument of a type the key does not
know, a configuration with a pre_hook.

Its own Python is kept to a few microseconds a launch (measured with a stand-in launcher on the course's CPU
machine: autograder/benchmarks/fast_check.py prices it on a GPU's host); the compiled kernel's launcher then costs
what it costs under Triton's own path too. A grid function is handed a mapping that looks names up on demand.
"""
from __future__ import annotations

import inspect
import os
import weakref

import torch

_ALL: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def fast(kernel) -> "FastKernel":
    """The fast launcher of a ``triton.jit`` (optionally ``autotune``d) kernel; one per kernel object."""
    fk = _ALL.get(kernel)
    if fk is None:
        fk = _ALL[kernel] = FastKernel(kernel)
    return fk


_Tensor = torch.Tensor


_BOOL = {True: "true", False: "false"}  # a bool must not key like the int it equals (True == 1 in a tuple)


def _spec_key(args) -> tuple:
    """The arguments as far as Triton's specialisation could see them, flat and at least as fine: per tensor its
    dtype and whether its address is 16-byte aligned; every int by its value (finer than Triton's "equal to 1,
    divisible by 16, 32 or 64 bits", so never wrong, and a lookup in C instead of arithmetic in Python); floats as
    one constant (never specialised); bools by a name of their own (never equal to an int's key); None as itself.
    Raises TypeError for any other type.
    (The hottest line here: one comprehension, the common types tested first.)"""
    return tuple([a if type(a) is int else (a.dtype, not a.data_ptr() & 15) if isinstance(a, _Tensor)
                  else 0.5 if type(a) is float else _BOOL[a] if type(a) is bool else _none_or_refuse(a) for a in args])


def _none_or_refuse(a):
    if a is None:
        return None
    raise TypeError(type(a))


class _Meta:
    """What a grid function sees, looked up on demand: building the dict of every argument by name cost about
    3 us a launch, and a grid reads two or three names."""
    __slots__ = ("args", "index", "extra")

    def __init__(self, args, index, extra):
        self.args, self.index, self.extra = args, index, extra

    def __getitem__(self, name):
        i = self.index.get(name)
        return self.args[i] if i is not None else self.extra[name]

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default


_MAX_PINS = 4096  # ints key by value: a program whose sizes never repeat must not grow the table forever


class FastKernel:
    def __init__(self, kernel):
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction
        self.kernel = kernel
        self.tuner = kernel if isinstance(kernel, Autotuner) else None
        jit = kernel.fn if self.tuner is not None else kernel
        self.jit = jit if isinstance(jit, JITFunction) else None  # e.g. heuristics under the autotuner: never pinned
        self.names = list(self.jit.arg_names) if self.jit is not None else []
        sig = inspect.signature(self.jit.fn).parameters if self.jit is not None else {}
        self.defaults = {n: p.default for n, p in sig.items()}
        # constexpr parameters passed by position: keyed by value, as Triton compiles one kernel per value
        self.const_idx = [i for i, p in enumerate(sig.values()) if "constexpr" in str(p.annotation)]
        self.pins: dict = {}
        self.index = {n: i for i, n in enumerate(self.names)}
        self.interpreted = os.environ.get("TRITON_INTERPRET", "0") == "1"
        self.stats = {"fast": 0, "triton": 0}  # calls that took each path (tests and the benchmark read it)
        if self.tuner is not None and any(c.pre_hook for c in self.tuner.configs):
            self.jit = None  # a pre_hook is the only hook Autotuner.run calls outside tuning: never bypass it

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(grid, args, kwargs)

    def _slow(self, grid, args, kwargs):
        self.stats["triton"] += 1
        return self.kernel[grid](*args, **kwargs)

    def run(self, grid, args, kwargs):
        if self.jit is None or self.interpreted or not _KNOBS or _triton_path_needed():
            return self._slow(grid, args, kwargs)
        device = _device()
        try:
            key = (device, _spec_key(args), tuple(kwargs.items()))
            if self.const_idx and len(args) > self.const_idx[0]:  # constexprs passed by position: by value
                key += tuple(args[i] for i in self.const_idx if i < len(args))
            pin = self.pins.get(key)  # (an autotuner's key arguments are ints: in the key by value already)
        except TypeError:  # a type the key does not know
            return self._slow(grid, args, kwargs)
        if pin is not None and pin[3] is not None and self.tuner.cache.get(pin[3]) is not pin[4]:
            pin = None  # the autotuner no longer holds this pick: let it decide again
            del self.pins[key]
        if pin is None:
            compiled = self._slow(grid, args, kwargs)
            if len(self.pins) >= _MAX_PINS:
                self.pins.clear()
            self._pin(key, compiled, args, kwargs)
            return compiled
        compiled, tail, extra, _tkey, _cfg = pin
        full = args + tail
        if callable(grid):
            grid = grid(_Meta(full, self.index, extra))
        g1 = grid[1] if len(grid) > 1 else 1
        g2 = grid[2] if len(grid) > 2 else 1
        rt = _KNOBS[0].runtime
        compiled.run(grid[0], g1, g2, _stream(device), compiled.function, compiled.packed_metadata, None,
                     rt.launch_enter_hook, rt.launch_exit_hook, *full)
        self.stats["fast"] += 1
        return compiled

    def _pin(self, key, compiled, args, kwargs):
        """Remember how to launch ``compiled`` for calls with this key: the positional arguments, then the rest of
        the parameters' fixed values (keywords, the autotuner's configuration, defaults) as one tuple."""
        if not hasattr(compiled, "packed_metadata") or not hasattr(compiled, "function"):
            return  # the interpreter, or a Triton this module does not know
        fixed = dict(kwargs)
        tkey = cfg = None
        extra = {}
        if self.tuner is not None:
            cfg = self.tuner.best_config
            fixed.update(cfg.kwargs)
            extra = cfg.all_kwargs()
            tkey = self._tuning_key(args, kwargs)
            if self.tuner.cache.get(tkey) is not cfg and len(self.tuner.configs) > 1:
                return  # this Triton keys its autotuner otherwise: never pin
        tail = []
        for name in self.names[len(args):]:
            if name in fixed:
                tail.append(fixed[name])
            elif self.defaults.get(name, inspect.Parameter.empty) is not inspect.Parameter.empty:
                tail.append(self.defaults[name])
            else:
                return
        self.pins[key] = (compiled, tuple(tail), extra, tkey, cfg)

    def _tuning_key(self, args, kwargs):
        """The autotuner's own key for this call (Autotuner.run: the key arguments' values, then each tensor's dtype)."""
        t = self.tuner
        if len(t.configs) <= 1:
            return None
        all_args = {**dict(zip(t.arg_names, args)), **kwargs}
        named = {k: v for k, v in all_args.items() if k in t.arg_names}
        key = [named[k] for k in t.keys if k in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        return tuple(key)


def _device() -> int:
    return _driver.active.get_current_device()


def _stream(device: int):
    return _driver.active.get_current_stream(device)


def _triton_path_needed() -> bool:
    """Whether this call must go through Triton's own launch: Triton's run replaced, a profiler's launch hook, or the
    course watching or recording the call (both count and record launches where Triton makes them)."""
    if _JIT.run is not _JIT_RUN or _AUTOTUNER.run is not _AUTOTUNER_RUN:
        return True  # someone intercepts launches (the course's watch, the grading worker's compile-ahead pass)
    hook = _KNOBS[0].runtime.launch_enter_hook
    if hook is not None and (not hasattr(hook, "calls") or hook.calls):
        return True
    return _watch.current() is not None or _record.active() is not None


from . import record as _record, watch as _watch  # noqa: E402  (after the definitions: no import cycle at load)

from triton.runtime import driver as _driver  # noqa: E402
from triton.runtime.autotuner import Autotuner as _AUTOTUNER  # noqa: E402
from triton.runtime.jit import JITFunction as _JIT  # noqa: E402

_JIT_RUN, _AUTOTUNER_RUN = _JIT.run, _AUTOTUNER.run  # as Triton defines them (kernellab loads before any patch)

try:  # Triton's runtime settings (launch hooks); a Triton without them (before 3.4) always takes its own path
    from triton import knobs as _knobs
    _KNOBS = [_knobs]
except ImportError:  # pragma: no cover
    _KNOBS = []
