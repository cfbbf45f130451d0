"""Allocations that expose the classic kernel bugs.

Every tensor handed to or created by a checked call is a view into a larger buffer:
the view starts filled with NaN (so unwritten elements show), and a NaN *guard region*
follows it (so an unmasked tail that writes past the end lands there and is seen, instead
of corrupting the heap - in the CPU interpreter that would abort the whole Python process).
"""
from __future__ import annotations

import torch

# Elements of guard after every buffer. An unmasked store goes at most one block past the end;
# blocks in this course are at most 16k elements wide (1-D) - the guard is comfortably larger.
GUARD = 1 << 15


def poison_value(dtype: torch.dtype):
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).min


def same_elements(a: torch.Tensor, b) -> torch.Tensor:
    """Element by element: is ``a`` what ``b`` (a tensor, or one value) holds, NaN matching NaN? 1-byte floats
    (FP8) are compared by their bytes: the CPU has no arithmetic on them, and an H100 flagged untouched e4m3
    memory through isnan; e4m3fn has one NaN pattern per sign, so equal bytes are equal values."""
    if not isinstance(b, torch.Tensor):
        b = torch.full((1,), b, dtype=a.dtype)
    b = b.to(a.device)
    if a.is_floating_point() and a.element_size() == 1:
        return a.view(torch.uint8) == b.view(torch.uint8)
    if a.is_floating_point() or a.is_complex():
        return (a == b) | (torch.isnan(a) & torch.isnan(b))
    return a == b


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(tuple(shape)):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def guard_elements(shape, strides) -> int:
    """Elements of guard after a view. A 2-D tile that runs past the last row (or, transposed, the last column)
    reaches up to 256 rows further: 256 of each of the two innermost strides. A program too many along an outer
    dimension (batch, head) writes whole outer strides further: up to 256 of them, but never more guard than the
    view itself holds (256 batch strides of a FlashAttention output at N = 16k were 32 GiB, and took a judge out of
    memory on an H100, 2026-11-25)."""
    strides = [abs(int(st)) for st in strides]
    guard = max([GUARD] + [256 * st + 256 for st in strides[-2:] if len(strides) > 1])
    outer = [256 * st + 256 for st in strides[:-2]]
    return max(guard, min(max(outer), span_of(shape, strides))) if outer else guard


def span_of(shape, strides) -> int:
    """Elements a strided view reaches, from offset 0 to its last element inclusive."""
    if any(int(s) == 0 for s in shape):
        return 0
    return 1 + sum((int(s) - 1) * abs(int(st)) for s, st in zip(shape, strides))


class Guarded:
    """A view with poisoned padding after it; ``guard_intact()`` says whether anything wrote there."""

    def __init__(self, shape, dtype, device, strides=None, guard=None, guard_value=None):
        shape = tuple(int(s) for s in shape)
        strides = tuple(strides) if strides is not None else contiguous_strides(shape)
        if guard is None:
            guard = guard_elements(shape, strides)
        self.span = span_of(shape, strides)
        self.guard_value = poison_value(dtype) if guard_value is None else guard_value
        self.base = torch.full((self.span + guard,), poison_value(dtype), dtype=dtype, device=device)
        self.base[self.span:] = self.guard_value
        self.view = self.base.as_strided(shape, strides, 0)

    def _guard_hits(self) -> torch.Tensor:
        return ~same_elements(self.base[self.span:], self.guard_value)

    def guard_intact(self) -> bool:
        return not bool(self._guard_hits().any())

    def first_guard_hit(self) -> int | None:
        """Offset past the end of the view of the first overwritten guard element, if any."""
        idx = torch.nonzero(self._guard_hits())
        return int(idx[0]) if idx.numel() else None


def guarded_copy(src: torch.Tensor, device, keep_strides: bool = True) -> Guarded:
    """Place ``src`` (CPU) on ``device`` inside a guarded buffer, with the same strides if asked."""
    strides = src.stride() if keep_strides else None
    # A finite guard after inputs: an unmasked load past the end then reads a number, and the
    # matching unmasked store writes a non-NaN into the output's NaN guard, where it is seen.
    sentinel = 1234.0 if src.dtype.is_floating_point else 123
    g = Guarded(src.shape, src.dtype, device, strides=strides, guard_value=sentinel)
    g.view.copy_(src.to(device))
    return g
