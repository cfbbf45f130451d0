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
    """Two bars (candidate, baseline) with the spread of the timed runs."""
    d = outcome.details
    if "cand_ms" not in d:
        return
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 1.8))
    data = [d["base_ms"], d["cand_ms"]]
    ax.boxplot(data, vert=False, widths=0.5)
    ax.set_yticks([1, 2], [problem.baseline_name, f"your {problem.names[0]}"])
    ax.set_xlabel("ms per call (each timed run, fresh inputs, L2 flushed)")
    ax.set_title(f"{problem.title}: {d.get('value', 0):.2f} ({d.get('band', '')})", fontsize=10)
    fig.tight_layout()
    plt.show()
