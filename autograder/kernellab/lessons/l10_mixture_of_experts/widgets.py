"""Lesson 10's picture: the grouped GEMM's row tiles, expert by expert, for given group sizes and BLOCK_M."""
from __future__ import annotations

from ...widgets_base import _interactive


def tile_table(group_sizes, block_m):
    """(expert, first row, end row) of each row tile, in launch order: the schedule the kernel computes."""
    out, start = [], 0
    for e, n in enumerate(group_sizes):
        for t in range(-(-n // block_m)):
            out.append((e, start + t * block_m, start + n))
        start += n
    return out


def tile_schedule(group_sizes, block_m: int = 16):
    """Each expert's rows (grey bars) and the row tiles that cover them (one colour an expert; hatched: the part
    of a tile past its expert's last row, which the kernel masks). The launch has cdiv(M, BLOCK_M) + E row tiles,
    a bound no group sizes can exceed; the ones past the last real tile exit at once (counted in the title)."""
    import matplotlib.patches as patches
    import matplotlib.pyplot as plt

    sizes = [int(s) for s in group_sizes]

    def render(block=block_m):
        tiles = tile_table(sizes, block)
        m = sum(sizes)
        launched = -(-m // block) + len(sizes)
        fig, ax = plt.subplots(figsize=(9, 0.5 + 0.35 * len(sizes)))
        start = 0
        for e, n in enumerate(sizes):
            ax.add_patch(patches.Rectangle((start, e), n, 0.8, color="0.8"))
            start += n
        for i, (e, lo, hi) in enumerate(tiles):
            ax.add_patch(patches.Rectangle((lo, e + 0.1), min(block, hi - lo), 0.6, color=f"C{e % 10}", alpha=0.7))
            if lo + block > hi:
                ax.add_patch(patches.Rectangle((hi, e + 0.1), lo + block - hi, 0.6, fill=False, hatch="//"))
            ax.text(lo + 0.5, e + 0.5, str(i), fontsize=7, va="center")
        ax.set_xlim(0, max(m, 1) + block)
        ax.set_ylim(len(sizes), -0.2)
        ax.set_yticks([e + 0.4 for e in range(len(sizes))], [f"expert {e} ({n})" for e, n in enumerate(sizes)])
        ax.set_xlabel("row of x_sorted")
        ax.set_title(f"{len(tiles)} row tiles do work; {launched - len(tiles)} of the {launched} launched "
                     f"(cdiv(M, {block}) + E) exit at once", fontsize=9)
        fig.tight_layout()

    def build(w):
        block = w.Dropdown(options=[8, 16, 32, 64, 128], value=block_m, description="BLOCK_M")
        return {"block": block}, [[block]]
    return _interactive(render, build, static=(block_m,))
