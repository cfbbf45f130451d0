"""Lesson 07's picture: the two-stage reduction of dweight (and dbias) in the fused LayerNorm backward."""
from __future__ import annotations

from ...widgets_base import _interactive


def partial_owner(row: int, rows: int, programs: int) -> int:
    """Which program of the first stage handles ``row`` when ``rows`` rows are split in ``programs`` runs."""
    per = -(-rows // programs)
    return row // per


def two_stage_reduction(rows: int = 24, programs: int = 4, cols: int = 8):
    """dweight[j] = sum over rows of dy * x_hat. Stage 1: each program walks its own run of rows (computing dx
    as it goes) and adds dy * x_hat into one row of a (programs, d) buffer of partial sums. Stage 2: one program
    per block of columns adds up that buffer's rows. Drag the sliders: how many programs, and which step."""
    import matplotlib.pyplot as plt
    import numpy as np

    def render(programs=programs, step=rows):
        per = -(-rows // programs)
        used = -(-rows // per)
        fig, (a, b, c) = plt.subplots(1, 3, figsize=(10, 3.4), gridspec_kw={"width_ratios": [3, 2, 1.2]})
        owner = np.array([partial_owner(r, rows, programs) for r in range(rows)])
        done = np.arange(rows) % per < min(step, per)
        grid = np.where(done[:, None], owner[:, None], np.nan) * np.ones((rows, cols))
        a.imshow(grid, cmap="tab10", vmin=0, vmax=9, aspect="auto")
        a.set_title(f"stage 1: {used} programs, {per} rows each\n(dx written row by row)", fontsize=9)
        a.set_xlabel("columns (d)")
        a.set_ylabel("rows")
        filled = np.clip(min(step, per) / per, 0, 1)
        part = np.arange(used)[:, None] * np.ones((used, cols))  # row k: program k's partial sums
        b.imshow(part, cmap="tab10", vmin=0, vmax=9, aspect="auto", alpha=0.25 + 0.75 * filled)
        b.set_title(f"partial sums, {used} x d, float32\n({filled:.0%} of each run added)", fontsize=9)
        b.set_xlabel("columns")
        b.set_ylabel("program")
        c.imshow(np.full((1, cols), 0.0) if step >= per else np.full((1, cols), np.nan), cmap="Greys", vmin=-1,
                 vmax=1, aspect="auto")
        c.set_title("stage 2: sum over\nprograms (axis 0)", fontsize=9)
        c.set_yticks([])
        c.set_xlabel("dweight")
        for ax in (a, b):
            ax.set_xticks([])
        fig.suptitle("one launch per stage: no atomics, the same sum on every run", fontsize=10)
        fig.tight_layout()

    def build(w):
        p = w.IntSlider(value=programs, min=1, max=rows, description="programs")
        s = w.IntSlider(value=rows, min=0, max=rows, description="step")
        return {"programs": p, "step": s}, [[p, s]]
    return _interactive(render, build)
