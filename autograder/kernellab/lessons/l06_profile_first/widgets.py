"""Lesson 06's picture: profile first, as Amdahl's law (what replacing some ops with a faster kernel gains)."""
from __future__ import annotations

from ...widgets_base import _interactive


def amdahl(share: float, speedup: float) -> float:
    """How much faster the whole gets when work taking ``share`` of its time runs ``speedup`` times faster."""
    return 1.0 / ((1.0 - share) + share / speedup)


def kernel_payoff(shares: dict, chosen=(), speedup: float = 4.0):
    """Profile first, as a picture: pick ops from a profile (name -> share of the time) and how much faster
    your kernel would run them; the bars show the time before and after, the title what the whole gains and
    the most it ever could (the other ops' time stays)."""
    import matplotlib.pyplot as plt

    names = list(shares)

    def render(chosen=tuple(chosen), speedup=speedup):
        f = sum(shares[n] for n in chosen)
        fig, ax = plt.subplots(figsize=(8, 2.4))
        rest = 1.0 - f
        ax.barh(["before", "after"], [rest, rest], color="0.7", label="ops you leave")
        ax.barh(["before", "after"], [f, f / speedup], left=[rest, rest], color="C1", label="ops your kernel replaces")
        ax.set_xlim(0, 1.05)
        ax.set_xlabel("time, as a fraction of the profiled block")
        ax.legend(loc="lower right", fontsize=8)
        best = "unbounded" if f >= 1 else f"{1 / (1 - f):.2f}x"
        ax.set_title(f"{f:.0%} of the time, {speedup:.1f}x faster: the block runs {amdahl(f, speedup):.2f}x faster "
                     f"(an infinitely fast kernel: {best})", fontsize=9)
        fig.tight_layout()

    def build(w):
        pick = w.SelectMultiple(options=names, value=tuple(chosen), rows=min(8, len(names)), description="replace")
        fast = w.FloatLogSlider(value=speedup, base=10, min=0, max=2, step=0.05, description="speedup")
        return {"chosen": pick, "speedup": fast}, [[pick, fast]]
    return _interactive(render, build)

