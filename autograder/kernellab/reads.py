"""Count the elements a kernel reads from a tensor, in Triton's CPU interpreter.

On a GPU there is no cheap way to count loads; in the interpreter every ``tl.load`` passes
through one Python method with the addresses and the mask, so the count is exact: masked-off
lanes read nothing and are not counted. Used to check that a softmax reads its input once
per pass (online softmax: two passes, not three).
"""
from __future__ import annotations

import contextlib
import dataclasses

import torch


@dataclasses.dataclass
class ReadCount:
    available: bool  # False outside the interpreter: nothing was counted
    elements: list  # per watched tensor: elements read (any kernel, any program)


def _span(t: torch.Tensor) -> tuple[int, int]:
    """[first byte, one past the last byte) that a view can reach."""
    reach = sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride())) + 1 if t.numel() else 0
    lo = t.data_ptr()
    return lo, lo + reach * t.element_size()


def interpreting() -> bool:
    from ._env import ON_GPU
    return not ON_GPU


@contextlib.contextmanager
def count_reads(tensors: list, anywhere: bool = False):
    """Within the block, count elements loaded from each of ``tensors`` (CPU tensors, interpreter mode).
    Atomics (``tl.atomic_add(ptr, 0)`` returns what was there) count as loads. With ``anywhere``, every
    element loaded from any address counts for the first tensor: the judge's replay can only reach the
    call's inputs and its own allocations, so a pass over a copy of the input is a pass all the same."""
    counter = ReadCount(interpreting(), [0] * len(tensors))
    if not counter.available:
        yield counter
        return
    import numpy as np
    from triton.runtime.interpreter import InterpreterBuilder

    spans = [_span(t) for t in tensors]
    originals = {name: getattr(InterpreterBuilder, name)
                 for name in ("create_masked_load", "create_atomic_rmw", "create_atomic_cas")}

    def count(ptrs, mask) -> None:
        addr = np.asarray(ptrs.data).astype(np.uint64, copy=False)
        live = np.ones(addr.shape, dtype=bool) if mask is None else np.broadcast_to(
            np.asarray(mask.data, dtype=bool), addr.shape)
        if anywhere and spans:
            counter.elements[0] += int(np.count_nonzero(live))
            return
        for i, (lo, hi) in enumerate(spans):
            counter.elements[i] += int(np.count_nonzero(live & (addr >= lo) & (addr < hi)))

    def counting_load(self, ptrs, mask, *args, **kwargs):
        count(ptrs, mask)
        return originals["create_masked_load"](self, ptrs, mask, *args, **kwargs)

    def counting_rmw(self, op, ptr, val, mask, *args, **kwargs):
        count(ptr, mask)
        return originals["create_atomic_rmw"](self, op, ptr, val, mask, *args, **kwargs)

    def counting_cas(self, ptr, *args, **kwargs):
        count(ptr, None)
        return originals["create_atomic_cas"](self, ptr, *args, **kwargs)

    InterpreterBuilder.create_masked_load = counting_load
    InterpreterBuilder.create_atomic_rmw = counting_rmw
    InterpreterBuilder.create_atomic_cas = counting_cas
    try:
        yield counter
    finally:
        for name, fn in originals.items():
            setattr(InterpreterBuilder, name, fn)
