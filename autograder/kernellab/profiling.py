"""Profile a call with torch.profiler and turn it into a table a person can act on: one row per op
that launched work, with its time, its share, and (from the shapes the profiler recorded) the FLOPs
and bytes it needed, hence its arithmetic intensity and its bound on this device.

Rows are aten ops, not raw kernel names: kernel names differ between GPUs and library versions
(``sm90_xmma_gemm_...`` on an H100, ``turing_fp16_s1688gemm_...`` on a T4), the op that launched
them does not, so an answer read off one GPU's table can be checked against another run's.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math

import torch

# Ops that the cost model below understands. Everything else that takes time lands in its own row
# with no FLOP or byte count (shown as "-").
_ELEMENTWISE_FLOPS = {"aten::add": 1, "aten::mul": 1, "aten::sub": 1, "aten::div": 1, "aten::masked_fill_": 1,
                      "aten::masked_fill": 1, "aten::gelu": 8, "aten::where": 1}


@dataclasses.dataclass
class OpRow:
    op: str
    calls: int
    ms: float  # total time of the op's own work (device time on a GPU, CPU time without one)
    share: float  # of all the profiled work
    flops: float | None
    bytes: float | None
    kernel: str = ""  # one kernel this op launched (GPU only), for the curious

    @property
    def intensity(self) -> float | None:
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes

    def bound(self, ridge: float) -> str | None:
        """'memory' or 'compute' against a ridge point (FLOP/byte); None for an op without a cost model."""
        ai = self.intensity
        return None if ai is None else ("memory" if ai < ridge else "compute")


def _numel(shape) -> int:
    return math.prod(shape) if shape else 1


def _is_tensor_shape(s) -> bool:
    return isinstance(s, (list, tuple)) and len(s) > 0 and all(isinstance(v, int) for v in s)


def cost(op: str, shapes: list, elem: int) -> tuple[float | None, float | None]:
    """(FLOPs, bytes) of one call of ``op`` on inputs of these shapes, each element ``elem`` bytes
    (bool masks 1 byte). None where the op is not modelled."""
    tensors = [list(s) for s in shapes if _is_tensor_shape(s)]
    if not tensors and (op in _ELEMENTWISE_FLOPS or op == "aten::copy_"):
        return 0.0, 0.0  # a scalar (a fill value moved to the device): nothing worth counting
    if op == "aten::addmm" and len(tensors) >= 3:
        (m, k), (_, n) = tensors[1], tensors[2]
        return 2.0 * m * k * n, float(elem * (m * k + k * n + m * n + n))
    if op == "aten::mm" and len(tensors) >= 2:
        (m, k), (_, n) = tensors[0], tensors[1]
        return 2.0 * m * k * n, float(elem * (m * k + k * n + m * n))
    if op == "aten::bmm" and len(tensors) >= 2:
        (b, m, k), (_, _, n) = tensors[0], tensors[1]
        return 2.0 * b * m * k * n, float(elem * b * (m * k + k * n + m * n))
    if op == "aten::_softmax" and tensors:
        n = _numel(tensors[0])
        return 5.0 * n, float(2 * elem * n)  # max, subtract, exp, sum, divide; read once, write once
    if op == "aten::native_layer_norm" and tensors:
        n, d = _numel(tensors[0]), tensors[0][-1]
        return 8.0 * n, float(2 * elem * n + 2 * elem * d)
    if op == "aten::copy_" and len(tensors) >= 2:
        n = _numel(tensors[0])
        return 0.0, float(2 * elem * n)
    if op in _ELEMENTWISE_FLOPS and tensors:
        n = max(_numel(t) for t in tensors)  # the broadcast output
        mask = 1 if "masked_fill" in op else 0
        read = sum(_numel(t) for t in tensors)
        moved = elem * (read + n) - (elem - 1) * (_numel(tensors[1]) if mask and len(tensors) > 1 else 0)
        return float(_ELEMENTWISE_FLOPS[op] * n), float(moved)
    return None, None


def profile(fn, elem_bytes: int, warmup: int = 2, iters: int = 5) -> list[OpRow]:
    """Profile ``fn()`` ``iters`` times, one call per profiling session, and keep each op's median time:
    a call slowed by something else on the machine (another process, a clock change) does not move it.
    Rows sorted by time, largest first."""
    import statistics
    on_gpu = torch.cuda.is_available()
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    for _ in range(warmup):  # first calls pay for cuBLAS handles, allocator growth, lazy initialisation
        fn()
    sync()
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if on_gpu else [])
    runs = []
    with _stderr_to_null(), _named_triton_launches():
        for _ in range(iters):
            with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
                fn()
                sync()
            runs.append({r.op: r for r in table(prof.events(), elem_bytes, on_gpu)})
    rows = []
    for op in {op for run in runs for op in run}:
        seen = [run[op] for run in runs if op in run]
        ms = statistics.median([r.ms for r in seen] + [0.0] * (len(runs) - len(seen)))
        first = seen[0]
        rows.append(OpRow(op, first.calls, ms, 0.0, first.flops, first.bytes, first.kernel))
    total = sum(r.ms for r in rows) or 1.0
    for r in rows:
        r.share = r.ms / total
    return sorted(rows, key=lambda r: -r.ms)


@contextlib.contextmanager
def _named_triton_launches():
    """A Triton kernel launched from Python is not an aten op, and the profiler would leave its time out
    of every row. Each launch gets a ``triton::<kernel>`` range while profiling, which owns its GPU time."""
    from .watch import launch_targets
    saved = []
    for cls, attr, counts in launch_targets():
        original = cls.__dict__.get(attr)
        if original is None or not counts:  # the autotuner's run calls a counted launch underneath
            continue

        def run(self, *args, _original=original, **kwargs):
            fn = getattr(self, "fn", None)
            name = getattr(fn, "__name__", None) or type(self).__name__
            with torch.profiler.record_function(f"triton::{name}"):
                return _original(self, *args, **kwargs)
        saved.append((cls, attr, original))
        setattr(cls, attr, run)
    try:
        yield
    finally:
        for cls, attr, original in saved:
            setattr(cls, attr, original)


@contextlib.contextmanager
def _stderr_to_null():
    """The profiler's C++ side logs its start and stop on file descriptor 2; in a notebook's test cell any
    text on stderr reads as a failure, so it goes nowhere (Python's own errors still raise)."""
    import os
    import sys
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real descriptor 2 (some embedded interpreters)
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _own_time_us(evt, on_gpu: bool) -> float:
    if on_gpu:  # (self_cuda_time_total, its old name, warns on stderr: not asked for)
        return float(getattr(evt, "self_device_time_total", 0) or 0)
    return float(evt.self_cpu_time_total or 0)


def table(events, elem_bytes: int, on_gpu: bool, iters: int = 1) -> list[OpRow]:
    """Group profiler events by op name; times and counts are per iteration."""
    rows: dict = {}
    for e in events:
        if not e.name.startswith(("aten::", "triton::")):
            continue
        us = _own_time_us(e, on_gpu)
        if us <= 0:
            continue
        r = rows.setdefault(e.name, {"us": 0.0, "calls": 0, "flops": 0.0, "bytes": 0.0, "known": True, "kernel": ""})
        r["us"] += us
        r["calls"] += 1
        f, b = cost(e.name, list(e.input_shapes or []), elem_bytes)
        if f is None:
            r["known"] = False
        else:
            r["flops"] += f
            r["bytes"] += b
        if on_gpu and not r["kernel"]:
            kernels = getattr(e, "kernels", None) or []
            if kernels:
                r["kernel"] = getattr(kernels[0], "name", "")
    total = sum(r["us"] for r in rows.values()) or 1.0
    out = [OpRow(name, r["calls"] // iters or 1, r["us"] / iters / 1e3, r["us"] / total,
                 r["flops"] / iters if r["known"] else None, r["bytes"] / iters if r["known"] else None, r["kernel"])
           for name, r in rows.items()]
    return sorted(out, key=lambda r: -r.ms)


def show(rows: list[OpRow], ridge: float | None = None, top: int = 12) -> None:
    """Print the table; with a ridge point, each modelled op gets its bound."""
    print(f"{'op':<30}{'calls':>6}{'ms':>9}{'share':>8}{'GFLOP':>9}{'MB':>9}{'FLOP/B':>9}  bound")
    for r in rows[:top]:
        ai = r.intensity
        bound = (r.bound(ridge) if ridge is not None else None) or ""
        fl = "-" if r.flops is None else f"{r.flops / 1e9:.2f}"
        mb = "-" if r.bytes is None else f"{r.bytes / 1e6:.1f}"
        print(f"{r.op:<30}{r.calls:>6}{r.ms:>9.3f}{r.share:>8.1%}{fl:>9}{mb:>9}"
              f"{'-' if ai is None else f'{ai:.1f}':>9}  {bound}")
    rest = rows[top:]
    if rest:
        print(f"... and {len(rest)} more ops, {sum(r.share for r in rest):.1%} of the time together")


__all__ = ["OpRow", "cost", "host_breakdown", "profile", "show", "table"]


# ------------------------------------------------------------------ the host's side of a call (section 6 of lesson 07)

def _label(func: tuple) -> str:
    """A cProfile key (file, line, name) as a person reads it: 'torch.empty', 'launch.py:99(run)'."""
    path, line, name = func
    if path == "~":  # a built-in: "<built-in method torch.empty>", "<method 'stride' of ...>"
        return name.strip("<>{}").replace("built-in method ", "").replace("method ", "")
    return f"{path.rsplit('/', 1)[-1]}:{line}({name})"


def host_breakdown(fn, calls: int = 300, top: int = 8) -> list[dict]:
    """Where the host's time in ``fn()`` goes: ``calls`` calls under cProfile, the functions with the most time of
    their own first. Each row: ``where`` (function), ``calls`` (per call of fn), ``own_us`` (own time per call of fn,
    profiler overhead included: compare rows with each other, and the total with timing.host_us) and ``share``."""
    import cProfile
    import pstats

    from .timing import _sync_if_gpu
    fn()
    _sync_if_gpu()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    _sync_if_gpu()
    stats = pstats.Stats(prof).stats  # func -> (primitive calls, calls, own time, cumulative time, callers)
    stats = {f: v for f, v in stats.items() if "_lsprof" not in f[2]}  # the profiler's own disable()
    total = sum(v[2] for v in stats.values()) or 1e-12
    rows = [{"where": _label(f), "calls": v[1] / calls, "own_us": v[2] * 1e6 / calls, "share": v[2] / total}
            for f, v in stats.items()]
    rows.sort(key=lambda r: -r["own_us"])
    return rows[:top]
