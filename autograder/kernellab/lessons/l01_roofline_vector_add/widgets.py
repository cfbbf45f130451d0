"""Lesson 01's picture: the roofline explorer (where a kernel of a given intensity lands on this device's
roofline)."""
from __future__ import annotations

import math

from ...widgets_base import _interactive


# Intensities (FLOPs per byte moved) of the course's kernels, for the roofline explorer.
ROOFLINE_OPS = {
    "vector add, fp32 (1 FLOP / 12 B)": 1 / 12,
    "vector add, fp16 (1 FLOP / 6 B)": 1 / 6,
    "silu_gate fused, fp16 (6 FLOPs / 6 B)": 1.0,
    "softmax fused, fp16 (~5 FLOPs / 4 B)": 5 / 4,
    "matmul 1024^3, fp16": 2 * 1024 ** 3 / (6 * 1024 ** 2),
    "matmul 4096^3, fp16": 2 * 4096 ** 3 / (6 * 4096 ** 2),
}


def roofline_explorer(ops: dict | None = None):
    """Pick a kernel (or drag the intensity) and see where it lands on this device's roofline: which
    ceiling binds it, and the best FLOP/s it could reach."""
    import matplotlib.pyplot as plt

    from ...ceilings import plotted
    from ...roofline import plot_roofline

    ops = ops or ROOFLINE_OPS
    _, ceil = plotted()

    def render(intensity=1.0):
        attainable = ceil.attainable(intensity)
        _, ax = plt.subplots(figsize=(7, 4.2))
        plot_roofline(points=[], ax=ax)
        ax.plot([intensity], [attainable / 1e12], "o", color="C3", ms=9)
        ax.set_title(f"{intensity:.3g} FLOP/B vs ridge {ceil.ridge:.0f}: {ceil.bound(intensity)}-bound, at best "
                     f"{attainable / 1e12:.3g} TFLOP/s ({100 * attainable / (ceil.fp16_tflops * 1e12):.2g}% of the "
                     "compute peak)", fontsize=9)

    step = 0.01  # of log10(FLOP/B): within 1.2 % of any kernel's intensity

    def on_grid(intensity: float) -> float:
        """The slider's own value for ``intensity``: the browser snaps a value off the slider's grid and sends it
        back, which would draw the picture twice, the second time at the snapped value."""
        return 10 ** (round(math.log10(intensity) / step) * step)

    def build(w):
        pick = w.Dropdown(options=list(ops), description="kernel", layout=w.Layout(width="420px"))
        slider = w.FloatLogSlider(value=on_grid(ops[pick.value]), base=10, min=-2, max=4, step=step,
                                  description="FLOP/B", readout_format=".3g")
        pick.observe(lambda change: setattr(slider, "value", on_grid(ops[change["new"]])), names="value")
        return {"intensity": slider}, [[pick, slider]]
    return _interactive(render, build, static=(next(iter(ops.values())),))

