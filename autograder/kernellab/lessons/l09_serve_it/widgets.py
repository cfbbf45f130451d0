"""Lesson 09's picture: the programs of a split-KV decode launch, as the SMs run them, for a chosen number of
splits - too few leave SMs idle behind the longest sequence, enough keep every SM streaming the cache."""
from __future__ import annotations

from ...widgets_base import _interactive


def schedule(lengths, kv_heads: int, splits: int, sms: int, slots: int = 4) -> dict:
    """A model of the launch: each non-empty program (one sequence, one KV head, one split) costs its number of
    keys; programs go, in launch order, to whichever of ``sms * slots`` resident slots frees first. Returns the
    makespan (keys), the ideal (all keys spread evenly), and each slot's list of (start, keys, sequence)."""
    import heapq
    max_len = max(lengths)
    split_len = -(-max_len // splits)
    free = [(0, s) for s in range(sms * slots)]
    heapq.heapify(free)
    lanes = [[] for _ in range(sms * slots)]
    for split in range(splits):  # the launch's first grid axis is the split (program_id(0)), fastest-moving
        for b, n in enumerate(lengths):
            for _ in range(kv_heads):
                keys = max(0, min(n, (split + 1) * split_len) - split * split_len)
                t, s = heapq.heappop(free)
                cost = keys + 32  # a program that has nothing to do still starts, reads its length and ends
                lanes[s].append((t, cost, b))
                heapq.heappush(free, (t + cost, s))
    total = sum(kv_heads * (n + 32 * splits) for n in lengths)
    return {"makespan": max(t for t, _ in free), "ideal": total / (sms * slots), "lanes": lanes,
            "programs": splits * kv_heads * len(lengths)}


def split_waves(batch: int, kv_heads: int, max_len: int, sms: int, splits: int | None, lengths=None):
    """The SMs' timelines for a split-KV launch over ``batch`` sequences of mixed lengths: move the number of
    splits and watch the longest sequence stop holding everyone up (and, past a point, the partials and empty
    programs start to cost)."""
    import matplotlib.pyplot as plt
    import torch

    if lengths is None:
        g = torch.Generator().manual_seed(0)
        lengths = [int(x) for x in torch.randint(max(1, max_len // 32), max_len + 1, (batch,), generator=g)]
        lengths[0] = max_len
    shown = min(sms, 24)

    def render(splits=splits or 1):
        plan = schedule(lengths, kv_heads, splits, sms)
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 1.3]})
        for lane, items in enumerate(plan["lanes"][:shown * 4]):
            for start, cost, b in items:
                ax.barh(lane, cost, left=start, color=f"C{b % 10}", height=0.8, lw=0)
        ax.axvline(plan["ideal"], color="k", ls=":", lw=1)
        ax.set_xlabel("time (keys streamed by one program)")
        ax.set_ylabel(f"program slots of the first {shown} SMs")
        ax.set_title(f"{splits} split(s): {plan['programs']:,} programs; finishes at "
                     f"{plan['makespan'] / plan['ideal']:.2f}x the even spread (dotted)", fontsize=9)
        options = [s for s in (1, 2, 4, 8, 16, 32, 64, 128) if s <= max(1, max_len // 64)]
        bx.plot(options, [schedule(lengths, kv_heads, s, sms)["makespan"] / 1e3 for s in options], "o-")
        bx.axvline(splits, color="C3", lw=1)
        bx.set_xscale("log", base=2)
        bx.set_xlabel("splits")
        bx.set_ylabel("finish (k keys)")
        bx.set_title(f"B={batch}, {kv_heads} KV heads, {sms} SMs", fontsize=9)
        fig.tight_layout()

    def build(w):
        s = w.SelectionSlider(options=[x for x in (1, 2, 4, 8, 16, 32, 64, 128) if x <= max(1, max_len // 64)],
                              value=splits or 1, description="splits")
        return {"splits": s}, [[s]]
    return _interactive(render, build, static=(splits or 1,))
