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
def count_reads(tensors: list):
    """Within the block, count elements loaded from each of ``tensors`` (CPU tensors, interpreter mode)."""
    counter = ReadCount(interpreting(), [0] * len(tensors))
    if not counter.available:
        yield counter
        return
    import numpy as np
    from triton.runtime.interpreter import InterpreterBuilder

    spans = [_span(t) for t in tensors]
    original = InterpreterBuilder.create_masked_load

    def counting_load(self, ptrs, mask, *args, **kwargs):
        addr = np.asarray(ptrs.data).astype(np.uint64, copy=False)
        live = np.broadcast_to(np.asarray(mask.data, dtype=bool), addr.shape)
        for i, (lo, hi) in enumerate(spans):
            counter.elements[i] += int(np.count_nonzero(live & (addr >= lo) & (addr < hi)))
        return original(self, ptrs, mask, *args, **kwargs)

    InterpreterBuilder.create_masked_load = counting_load
    try:
        yield counter
    finally:
        InterpreterBuilder.create_masked_load = original
