"""Lesson 02's picture: which tiles one wave of programs computes under a tile order, and which strips of
A and B it reads."""
from __future__ import annotations

from ...widgets_base import _interactive


def wave_footprint(tile_of, num_pid_m: int, num_pid_n: int, group_m: int, first: int, count: int):
    """Tiles computed by programs first..first+count-1, and the A row blocks / B column blocks they read."""
    tiles = [tuple(tile_of(p, num_pid_m, num_pid_n, group_m))
             for p in range(first, min(first + count, num_pid_m * num_pid_n))]
    return tiles, sorted({m for m, _ in tiles}), sorted({n for _, n in tiles})


def _draw(ax, tiles, done, rows, cols, num_pid_m, num_pid_n, title):
    import matplotlib.patches as patches

    ax.clear()
    ax.set_xlim(-1.6, num_pid_n)
    ax.set_ylim(num_pid_m, -1.6)
    ax.set_aspect("equal")
    ax.axis("off")
    for m, n in done:
        ax.add_patch(patches.Rectangle((n, m), 1, 1, color="0.85"))
    for m, n in tiles:
        ax.add_patch(patches.Rectangle((n, m), 1, 1, color="C1"))
    for m in rows:  # A's row blocks, drawn left of C
        ax.add_patch(patches.Rectangle((-1.5, m), 1, 1, color="C0"))
    for n in cols:  # B's column blocks, drawn above C
        ax.add_patch(patches.Rectangle((n, -1.5), 1, 1, color="C2"))
    ax.add_patch(patches.Rectangle((0, 0), num_pid_n, num_pid_m, fill=False, lw=1))
    ax.text(-1.0, -0.9, "A", ha="center", fontsize=9)
    ax.text(-0.3, -1.0, "B", ha="right", fontsize=9)
    ax.set_title(title, fontsize=9)


def tile_order(orders: dict, num_pid_m: int = 16, num_pid_n: int = 16, group_m: int = 4, wave: int | None = None):
    """Which tiles one wave of programs computes under each order (name -> fn(pid, num_pid_m, num_pid_n,
    group_m)), and which strips of A and B that wave has to read: orange tiles are being computed, blue
    and green strips are read. Fewer strips for the same number of tiles means more reuse from L2.
    """
    import matplotlib.pyplot as plt

    from ...device import DEVICE

    wave = wave or (DEVICE.sms if DEVICE.on_gpu and DEVICE.sms else 24)
    total = num_pid_m * num_pid_n

    def render(step=0, group=group_m):
        first = min(step * wave, total - 1)
        fig, axes = plt.subplots(1, len(orders), figsize=(4.5 * len(orders), 4.6), squeeze=False)
        for ax, (name, fn) in zip(axes[0], orders.items()):
            tiles, rows, cols = wave_footprint(fn, num_pid_m, num_pid_n, group, first, wave)
            done, _, _ = wave_footprint(fn, num_pid_m, num_pid_n, group, 0, first)
            _draw(ax, tiles, done, rows, cols, num_pid_m, num_pid_n,
                  f"{name}: {len(tiles)} tiles read {len(rows)} A + {len(cols)} B strips "
                  f"({len(rows) + len(cols)} in all)")
        fig.suptitle(f"programs {first}..{min(first + wave, total) - 1} of {total} "
                     f"(one wave = {wave} programs, GROUP_M = {group})", fontsize=10)
        fig.tight_layout()

    def build(w):
        step = w.IntSlider(0, 0, max(0, (total - 1) // wave), description="wave")
        group = w.IntSlider(group_m, 1, num_pid_m, description="GROUP_M")
        return {"step": step, "group": group}, [[step, group]]
    return _interactive(render, build, static=(0,))

