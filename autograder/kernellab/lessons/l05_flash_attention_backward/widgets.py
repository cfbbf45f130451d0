"""Lesson 05's picture: the backward pass's two kernels (dK/dV and dQ) walking the tiles of P."""
from __future__ import annotations

from ...widgets_base import _interactive
from ..l04_flash_attention.widgets import _TILE_COLOURS, _score_axes


def backward_tiles(dkdv_visits, dq_visits, n_ctx: int, block_m: int, block_n: int, causal: bool):
    """The backward pass's two kernels on the N x N matrix P, side by side. Left: one dK/dV program owns a
    column of key blocks and walks down the query blocks; right: one dQ program owns a row of query blocks
    and walks across the keys. Each recomputes its tiles of P, so every visible tile is computed twice.
    Green: no mask; orange: masked (diagonal or a partial block); grey: skipped; outlined: on chip now.
    ``dkdv_visits`` and ``dq_visits(n_ctx, block_m, block_n, causal, program)`` give the schedules
    (lesson05.dkdv_visits, lesson04.program_visits), each tile as {"rows": (lo, hi), "keys": (lo, hi), "kind"}."""
    import matplotlib.patches as patches
    import matplotlib.pyplot as plt

    n_kb, n_qb = -(-n_ctx // block_n), -(-n_ctx // block_m)

    def panel(ax, plan, step, title):
        todo = [t for t in plan if t["kind"] != "skipped"]
        for t in plan:
            (r0, r1), (k0, k1) = t["rows"], t["keys"]
            ax.add_patch(patches.Rectangle((k0, r0), k1 - k0 + 1, r1 - r0 + 1, color=_TILE_COLOURS[t["kind"]], lw=0))
        if todo:
            (r0, r1), (k0, k1) = todo[min(step, len(todo)) - 1]["rows"], todo[min(step, len(todo)) - 1]["keys"]
            ax.add_patch(patches.Rectangle((k0, r0), k1 - k0 + 1, r1 - r0 + 1, fill=False, lw=2.5, color="k"))
        _score_axes(ax, n_ctx, causal, f"{title}: tile {min(step, len(todo))} of {len(todo)} "
                                       f"({sum(t['kind'] == 'masked' for t in todo)} masked)")

    def render(key_block=0, query_block=0, step=1, causal=causal):
        left, right = (dkdv_visits(n_ctx, block_m, block_n, causal, key_block),
                       dq_visits(n_ctx, block_m, block_n, causal, query_block))
        fig, axes = plt.subplots(1, 2, figsize=(10.5, 5.4))
        panel(axes[0], left, step, f"dK, dV of keys {key_block * block_n}..")
        panel(axes[1], right, step, f"dQ of queries {query_block * block_m}..")
        visible = sum(t["kind"] != "skipped" for j in range(n_kb) for t in dkdv_visits(n_ctx, block_m, block_n, causal, j))
        fig.suptitle(f"P has {visible} visible tiles of {block_m} x {block_n}: the forward computes each once, "
                     f"the backward twice (once per kernel)", fontsize=10)
        fig.tight_layout()

    def build(w):
        kb = w.IntSlider(0, 0, n_kb - 1, description="key block")
        qb = w.IntSlider(n_qb - 1, 0, n_qb - 1, description="query block")
        step = w.IntSlider(1, 1, max(n_kb, n_qb), description="step")
        box = w.Checkbox(causal, description="causal")
        return {"key_block": kb, "query_block": qb, "step": step, "causal": box}, [[kb, qb], [step, box]]
    return _interactive(render, build)

