"""How the course tells what it found.

To the learner: a check speaks one paragraph, never a traceback from inside the checker (CheckFailed, say,
speed_plot), and returns nothing (a returned score showed as a stray ``Out[ ]`` under the cell). In reports
(benchmark, regrade, corpus, agreement): markdown tables under a header that names the GPU, the versions, the
date and the device fingerprint (_header, md_table, met, save_roofline).
"""
from __future__ import annotations

import datetime
import pathlib
import sys

from .device import DEVICE, fingerprint


class CheckFailed(Exception):
    """A failed check. IPython shows only the message (no traceback), and nbgrader sees an error."""

    def _render_traceback_(self):
        return ["\x1b[0;31m✗ " + str(self) + "\x1b[0m"]


def say(text: str) -> None:
    # stdout only: nbgrader scores any stderr text in a test cell as zero
    print(text, file=sys.stdout, flush=True)


def speed_plot(outcome, problem) -> None:
    """Every timed run of the candidate and the baseline as dots, with a bar at each median."""
    d = outcome.details
    if "cand_ms" not in d:
        return
    import statistics

    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 1.9))
    rows = [(problem.baseline_name, d["base_ms"]), (f"your {problem.names[0]}", d["cand_ms"])]
    for y, (label, times) in enumerate(rows):
        ax.barh(y, statistics.median(times), color="C0" if y else "C7", alpha=0.35)
        ax.plot(times, [y] * len(times), "o", ms=3, color="C0" if y else "C7")
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.set_xlabel("ms per call (each timed run: fresh inputs, L2 flushed)")
    ax.set_title(f"{problem.title}: {d.get('value', 0):.2f} (band {d.get('band', '')})", fontsize=10)
    fig.tight_layout()
    plt.show()


def _header() -> list[str]:
    import torch
    import triton
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [f"- GPU: **{DEVICE.name}** ({DEVICE.cc}, {DEVICE.sms} SMs), driver {DEVICE.driver}",
            f"- torch {torch.__version__}, triton {triton.__version__}, Python {sys.version.split()[0]}",
            f"- date: {now}", f"- fingerprint: `{fingerprint()}`"]


TIMING = ("Medians of interleaved rounds (CUDA events; before every run the L2 is flushed and the GPU kept "
          "busy while the host launches, so launch cost is not timed; see timing.bench).")


def md_table(columns: list, rows: list) -> list[str]:
    """Markdown table lines: a header, its rule, one line per row of already formatted cells."""
    return (["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


PAID = ("Launches paid: `triton.testing.do_bench`'s median (no GPU-side wait: where the host takes longer to issue a "
        "call than the GPU to run it, the host's time is what it reads) and the host's time per call (`timing.host_us`: "
        "calls back to back, the GPU not waited on).")


def paid_table(title: str, rows: list, label: str, label_of, names: list) -> list[str]:
    """Markdown lines for the launch-paid numbers rows carry (timing.add_launch_paid's keys): per row, each
    contender's do_bench ms and host us; rows without them are left out (an older report)."""
    rows = [r for r in rows if f"{names[0]}_do_bench_ms" in r]
    if not rows:
        return []
    cols = [label] + [f"{n} do_bench ms" for n in names] + [f"{n} host us" for n in names]
    body = [[label_of(r)] + [f"{r.get(f'{n}_do_bench_ms', float('nan')):.4f}" for n in names]
            + [f"{r.get(f'{n}_host_us', float('nan')):.1f}" for n in names] for r in rows]
    return ["", f"### {title}: launches paid", "", PAID, ""] + md_table(cols, body)


def met(value: float, target: float) -> str:
    """A table cell saying whether a measured ratio meets its target."""
    return "yes" if value >= target else "**no**"


def save_roofline(points: list, title: str, path: pathlib.Path) -> None:
    from .roofline import plot_roofline
    ax = plot_roofline(points, title=title)
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=110)
