"""Lesson 08's picture: one program's timeline over its K/V tiles, run serially, software-pipelined over
``num_stages`` shared-memory buffers, and warp-specialised (a TMA producer warp, two ping-pong consumers)."""
from __future__ import annotations

from ...widgets_base import _interactive

MODES = ("serial", "pipelined", "specialised")
LANES = {"serial": ("warps",), "pipelined": ("copy engine", "warps"),
         "specialised": ("producer warp", "consumer 0", "consumer 1")}
COLOURS = {"load": "tab:blue", "mma": "tab:orange", "softmax": "tab:green", "wait": "0.88"}


def _check(n_tiles, stages, load, mma, softmax, mode):
    if isinstance(n_tiles, bool) or not isinstance(n_tiles, int) or n_tiles < 1:
        raise ValueError(f"n_tiles must be a whole number of tiles, at least 1 (got {n_tiles!r})")
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        raise ValueError(f"stages (num_stages) counts shared-memory buffers: a whole number, at least 1 "
                         f"(got {stages!r})")
    for name, value in (("load", load), ("mma", mma)):
        if not value > 0:
            raise ValueError(f"{name} is a duration: it must be greater than 0 (got {value!r})")
    if not softmax >= 0:
        raise ValueError(f"softmax is a duration: it must be 0 (no softmax, as in a matmul) or more "
                         f"(got {softmax!r})")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)} (got {mode!r})")


def pipeline_schedule(n_tiles: int, stages: int, load: float, mma: float, softmax: float = 0.0,
                      mode: str = "specialised") -> list[dict]:
    """The timeline of one program over ``n_tiles`` tiles: events {"lane", "tile", "what", "start", "end"},
    "what" one of load, mma, softmax or wait (a lane idle until ``tile``'s next step can start), by start."""
    _check(n_tiles, stages, load, mma, softmax, mode)
    if mode == "serial":  # num_stages=1: one buffer, so the next load waits for this tile's compute
        stages, loader = 1, "warps"
    else:
        loader = LANES[mode][0]
    events, load_end, done, lane_free, mma_free = [], 0.0, [], {}, 0.0
    for i in range(n_tiles):
        # One copy engine issues in order, and tile i's buffer is the one tile i-stages used: free once
        # that tile's compute (mma and softmax) has finished with it.
        start = max(load_end, done[i - stages] if i >= stages else 0.0)
        load_end = start + load
        events.append(dict(lane=loader, tile=i, what="load", start=start, end=load_end))
        lane = f"consumer {i % 2}" if mode == "specialised" else "warps"
        # Wait for the data, for this lane's previous tile, and for the tensor cores (shared by both
        # consumers: mmas never overlap; a softmax runs on the other warpgroup's own ALUs).
        start = max(load_end, lane_free.get(lane, 0.0), mma_free)
        mma_free = start + mma
        events.append(dict(lane=lane, tile=i, what="mma", start=start, end=mma_free))
        if softmax > 0:
            events.append(dict(lane=lane, tile=i, what="softmax", start=mma_free, end=mma_free + softmax))
        done.append(mma_free + softmax)
        lane_free[lane] = done[-1]
    for lane in LANES[mode]:  # the gaps, drawn as waits: what the faster modes get rid of
        t = 0.0
        for e in sorted((e for e in events if e["lane"] == lane), key=lambda e: e["start"]):
            if e["start"] > t + 1e-12:
                events.append(dict(lane=lane, tile=e["tile"], what="wait", start=t, end=e["start"]))
            t = e["end"]
    return sorted(events, key=lambda e: (e["start"], e["end"]))


def makespan(events) -> float:
    """When the program's last event ends."""
    return max(e["end"] for e in events)


def busy_fraction(events, what: str = "mma") -> float:
    """The share of the makespan spent on ``what`` (for "mma": how busy the tensor cores were)."""
    return sum(e["end"] - e["start"] for e in events if e["what"] == what) / makespan(events)


def warp_timeline(n_tiles: int = 8, stages: int = 3, load: float = 1.0, mma: float = 1.0, softmax: float = 0.6):
    """The three schedules of the same tiles, one above the other (times in units of one tile's MMA). Serial
    leaves the tensor cores idle during every load; pipelining hides the load behind the previous tiles' compute
    once stages >= 2; the specialised ping-pong also hides one consumer's softmax behind the other's MMA."""
    import matplotlib.pyplot as plt

    def render(stages=stages, load=load, softmax=softmax, n_tiles=n_tiles):
        fig, axes = plt.subplots(3, 1, figsize=(10, 6.2), sharex=True,
                                 gridspec_kw={"height_ratios": [len(LANES[m]) + 0.6 for m in MODES]})
        for ax, mode in zip(axes, MODES):
            events = pipeline_schedule(n_tiles, stages, load, mma, softmax, mode)
            lanes = LANES[mode]
            for e in events:
                y, width = lanes.index(e["lane"]), e["end"] - e["start"]
                ax.barh(y, width, left=e["start"], height=0.7, color=COLOURS[e["what"]], edgecolor="white")
                if e["what"] != "wait":  # which tile: follow one tile from its load to its softmax
                    ax.text(e["start"] + width / 2, y, str(e["tile"]), ha="center", va="center", fontsize=7)
            ax.set_yticks(range(len(lanes)), lanes)
            ax.invert_yaxis()
            ax.set_title(f"{mode}: makespan {makespan(events):.1f}, tensor cores busy "
                         f"{busy_fraction(events):.0%}", fontsize=9)
        axes[-1].set_xlabel("time (one MMA = 1)")
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
        fig.legend(handles, list(COLOURS), loc="upper right", ncol=4, fontsize=8)
        fig.suptitle(f"{n_tiles} tiles, num_stages={stages}", fontsize=10, x=0.3)
        fig.tight_layout()

    def build(w):
        s = w.IntSlider(value=stages, min=1, max=6, description="stages")
        ld = w.FloatSlider(value=load, min=0.2, max=3.0, step=0.1, description="load")
        sm = w.FloatSlider(value=softmax, min=0.0, max=2.0, step=0.1, description="softmax")
        n = w.IntSlider(value=n_tiles, min=1, max=16, description="tiles")
        return {"stages": s, "load": ld, "softmax": sm, "n_tiles": n}, [[s, n], [ld, sm]]
    return _interactive(render, build)
