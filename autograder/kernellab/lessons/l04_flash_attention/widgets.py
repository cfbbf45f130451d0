"""Lesson 04's picture: the N x N score matrix in tiles, as one FlashAttention program visits them (lesson
05's backward picture draws on the same axes and colours)."""
from __future__ import annotations

from ...widgets_base import _interactive


_TILE_COLOURS = {"full": "C2", "masked": "C1", "skipped": "0.9"}


def _score_axes(ax, n_ctx: int, causal: bool, title: str) -> None:
    """Axes for the N x N score matrix: queries down, keys across, the causal diagonal dotted."""
    ax.set_xlim(0, n_ctx)
    ax.set_ylim(n_ctx, 0)
    ax.set_aspect("equal")
    ax.set_xlabel("keys (K and V rows)")
    ax.set_ylabel("queries (Q rows)")
    if causal:
        ax.plot([0, n_ctx], [0, n_ctx], color="k", lw=0.6, ls=":")
    ax.set_title(title, fontsize=9)


def attention_tiles(visits, n_ctx: int, block_m: int, block_n: int, causal: bool):
    """The N x N score matrix in tiles: pick a program (a block of query rows) and step through the key
    blocks it visits. Green tiles need no mask, orange ones do (the diagonal, the last partial block), grey
    ones are skipped (above the diagonal); the outlined tile is the one on chip now. ``visits(n_ctx,
    block_m, block_n, causal, program)`` gives the schedule (lesson04.program_visits)."""
    import matplotlib.patches as patches
    import matplotlib.pyplot as plt

    n_prog = (n_ctx + block_m - 1) // block_m

    def render(program=0, step=1, causal=causal):
        plan = visits(n_ctx, block_m, block_n, causal, program)
        todo = [p for p in plan if p["kind"] != "skipped"]
        step = min(step, len(todo))
        fig, ax = plt.subplots(figsize=(6.2, 6.2))
        for i in range(n_prog):  # every program's row of tiles, faintly
            for p in visits(n_ctx, block_m, block_n, causal, i):
                lo, hi = p["keys"]
                alpha = 1.0 if i == program else 0.18
                ax.add_patch(patches.Rectangle((lo, i * block_m), hi - lo + 1, min(block_m, n_ctx - i * block_m),
                                               color=_TILE_COLOURS[p["kind"]], alpha=alpha, lw=0))
        if todo:
            lo, hi = todo[step - 1]["keys"]
            ax.add_patch(patches.Rectangle((lo, program * block_m), hi - lo + 1,
                                           min(block_m, n_ctx - program * block_m), fill=False, lw=2.5, color="k"))
        skipped = len(plan) - len(todo)
        masked = sum(p["kind"] == "masked" for p in todo)
        _score_axes(ax, n_ctx, causal, f"program {program}: Q rows {program * block_m}.."
                    f"{min((program + 1) * block_m, n_ctx) - 1} stay on chip;\nkey block {step} of {len(todo)} "
                    f"({masked} masked, {skipped} skipped above the diagonal)")
        fig.tight_layout()

    def build(w):
        prog = w.IntSlider(0, 0, n_prog - 1, description="program")
        step = w.IntSlider(1, 1, (n_ctx + block_n - 1) // block_n, description="key block")
        box = w.Checkbox(causal, description="causal")
        return {"program": prog, "step": step, "causal": box}, [[prog, step, box]]
    return _interactive(render, build)

