"""Interactive pictures of how kernels move data (ipywidgets + matplotlib; no extension needed)."""
from __future__ import annotations


def _widgets():
    """ipywidgets and IPython's display, or None where a static picture is drawn instead: plain Python, and
    headless runs (nbgrader's validate and autograde, which set NBGRADER_EXECUTION, and KERNELLAB_STATIC_WIDGETS
    for the course's own notebook runs). Nobody can move a slider there, and a cell that creates widgets can
    leave a headless client waiting forever (nbclient issue 312; seen in this project's CI)."""
    import os
    if os.environ.get("NBGRADER_EXECUTION") or os.environ.get("KERNELLAB_STATIC_WIDGETS"):
        return None
    try:
        import ipywidgets
        from IPython.display import display
    except ImportError:
        return None
    return ipywidgets, display


def _interactive(render, build, static=()):
    """Draw ``render`` under ipywidgets controls, or once with the ``static`` arguments where no widget can be
    shown (see _widgets). ``build(w)`` makes the controls from the ipywidgets module ``w`` and returns
    ({render's argument: its widget}, [rows of widgets to lay out]). Returns the widget box, or None."""
    ui = _widgets()
    if ui is None:  # one static picture
        render(*static)
        return None
    w, display = ui
    args, rows = build(w)
    box = w.VBox([w.HBox(row) for row in rows] + [w.interactive_output(render, args)])
    display(box)
    return box


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

    from .device import DEVICE

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
        plt.show()

    def build(w):
        step = w.IntSlider(0, 0, max(0, (total - 1) // wave), description="wave")
        group = w.IntSlider(group_m, 1, num_pid_m, description="GROUP_M")
        return {"step": step, "group": group}, [[step, group]]
    return _interactive(render, build, static=(0,))


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
        plt.show()

    def build(w):
        slider = w.IntSlider(1, 1, len(steps), description="block")
        return {"step": slider}, [[slider]]
    _interactive(render, build, static=(len(steps),))
    return steps


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
        plt.show()

    def build(w):
        kb = w.IntSlider(0, 0, n_kb - 1, description="key block")
        qb = w.IntSlider(n_qb - 1, 0, n_qb - 1, description="query block")
        step = w.IntSlider(1, 1, max(n_kb, n_qb), description="step")
        box = w.Checkbox(causal, description="causal")
        return {"key_block": kb, "query_block": qb, "step": step, "causal": box}, [[kb, qb], [step, box]]
    return _interactive(render, build)


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
        plt.show()

    def build(w):
        prog = w.IntSlider(0, 0, n_prog - 1, description="program")
        step = w.IntSlider(1, 1, (n_ctx + block_n - 1) // block_n, description="key block")
        box = w.Checkbox(causal, description="causal")
        return {"program": prog, "step": step, "causal": box}, [[prog, step, box]]
    return _interactive(render, build)


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
        plt.show()

    def build(w):
        pick = w.SelectMultiple(options=names, value=tuple(chosen), rows=min(8, len(names)), description="replace")
        fast = w.FloatLogSlider(value=speedup, base=10, min=0, max=2, step=0.05, description="speedup")
        return {"chosen": pick, "speedup": fast}, [[pick, fast]]
    return _interactive(render, build)


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

    from .ceilings import plotted
    from .roofline import plot_roofline

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
        plt.show()

    def build(w):
        pick = w.Dropdown(options=list(ops), description="kernel", layout=w.Layout(width="420px"))
        slider = w.FloatLogSlider(value=ops[pick.value], base=10, min=-2, max=4, step=0.05,
                                  description="FLOP/B", readout_format=".3g")
        pick.observe(lambda change: setattr(slider, "value", ops[change["new"]]), names="value")
        return {"intensity": slider}, [[pick, slider]]
    return _interactive(render, build, static=(next(iter(ops.values())),))
