"""How a check speaks to the learner: one paragraph, never a traceback from inside the checker."""
from __future__ import annotations

import sys


class CheckFailed(Exception):
    """A failed check. IPython shows only the message (no traceback), and nbgrader sees an error."""

    def _render_traceback_(self):
        return ["\x1b[0;31m✗ " + str(self) + "\x1b[0m"]


class Score(float):
    """Partial credit: nbgrader reads the number a test cell evaluates to."""

    def __repr__(self):
        return f"{float(self):g}"


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
