"""Bytes each PyTorch op reads and writes, counted by watching the dispatcher.

Every eager op is one (or more) kernel launch that reads its input tensors from memory and
writes its outputs back. Counting the bytes of those tensors op by op shows what fusion saves.
Works on any device, including ``meta`` (no data, no compute: the counts alone).
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Ops that only describe memory (views, sizes) or allocate without writing: no traffic.
_FREE = {"view", "_unsafe_view", "reshape", "expand", "t", "transpose", "permute", "slice", "select",
         "unsqueeze", "squeeze", "detach", "alias", "empty", "empty_like", "empty_strided", "sym_size",
         "sym_stride", "sym_numel", "lift_fresh", "as_strided"}


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class _Traffic(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.rows = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name not in _FREE:
            read = sum(_nbytes(t) for t in _tensors(list(args) + list((kwargs or {}).values())))
            written = sum(_nbytes(t) for t in _tensors(out))
            self.rows.append({"op": f"torch.{name}", "read": read, "written": written})
        return out


def traffic(fn, *args) -> list[dict]:
    """[{'op', 'read', 'written'}] for every op ``fn(*args)`` runs, in order."""
    with _Traffic() as mode:
        fn(*args)
    return mode.rows


def show_traffic(rows: list[dict], title: str = "") -> int:
    """Print the table; return the total bytes moved."""
    if title:
        print(title)
    print(f"{'#':>2}  {'op':<22}{'read (bytes)':>16}{'written (bytes)':>17}")
    total = 0
    for i, r in enumerate(rows, 1):
        print(f"{i:>2}  {r['op']:<22}{r['read']:>16,}{r['written']:>17,}")
        total += r["read"] + r["written"]
    print(f"    {'total moved':<22}{total:>33,} bytes in {len(rows)} kernel(s)")
    return total
