"""Lesson 03's picture: the online softmax of one row, a block at a time."""
from __future__ import annotations

from ...widgets_base import _interactive


def online_softmax_trace(row, block: int) -> list[dict]:
    """The online softmax's state after each block of ``row``: running max ``m``, running sum ``l``
    (of exp(x - m) over the blocks seen so far) and the factor exp(m_old - m_new) that rescaled ``l``."""
    import math
    m, l, steps = -math.inf, 0.0, []
    values = [float(v) for v in row]
    for start in range(0, len(values), block):
        chunk = values[start:start + block]
        m_new = max(m, max(chunk))
        scale = math.exp(m - m_new)  # 0.0 on the first block: there is nothing to rescale yet
        l = l * scale + sum(math.exp(v - m_new) for v in chunk)
        steps.append({"start": start, "stop": start + len(chunk), "m_old": m, "m": m_new, "scale": scale, "l": l})
        m = m_new
    return steps


def online_softmax_steps(row=None, block: int = 8, seed: int = 0):
    """Step through the online softmax of one row, a block at a time: the bars are the row, grey blocks
    are done, the orange block is being read; the text gives m, l and the rescaling factor."""
    import math

    import matplotlib.pyplot as plt
    import torch

    if row is None:  # a row whose max jumps twice, so the rescaling happens where one can see it
        g = torch.Generator().manual_seed(seed)
        row = torch.randn(48, generator=g)
        row[13] += 3.0
        row[37] += 5.0
    values = [float(v) for v in row]
    steps = online_softmax_trace(values, block)
    true_m = max(values)
    true_l = sum(math.exp(v - true_m) for v in values)

    def render(step=1):
        s = steps[step - 1]
        fig, ax = plt.subplots(figsize=(9, 3.4))
        colours = ["0.7" if i < s["start"] else "C1" if i < s["stop"] else "C0" for i in range(len(values))]
        ax.bar(range(len(values)), values, color=colours)
        ax.axhline(s["m"], color="C3", lw=1.2, label=f"running max m = {s['m']:.3f}")
        if step > 1:
            ax.axhline(s["m_old"], color="C3", lw=0.8, ls=":", label=f"m before this block = {s['m_old']:.3f}")
        ax.set_xlabel("column")
        ax.legend(loc="upper left", fontsize=8)
        rescale = ("first block: l starts from 0" if step == 1 else
                   f"l_old x exp(m_old - m) = l_old x {s['scale']:.4f}" + (" (the max moved)" if s["scale"] < 1 else ""))
        ax.set_title(f"block {step} of {len(steps)}: {rescale};  l = {s['l']:.4f}", fontsize=9)
        if step == len(steps):
            ax.text(0.99, 0.03, f"two-pass answer: max {true_m:.3f}, sum {true_l:.4f}", ha="right",
                    transform=ax.transAxes, fontsize=8)
        fig.tight_layout()

    def build(w):
        slider = w.IntSlider(1, 1, len(steps), description="block")
        return {"step": slider}, [[slider]]
    _interactive(render, build, static=(len(steps),))
    return steps

