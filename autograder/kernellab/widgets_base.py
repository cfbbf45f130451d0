"""What every lesson's pictures share: ipywidgets controls where a learner can move them, one static
picture where nobody can (plain Python, headless notebook runs). The pictures themselves live with
their lesson, in ``lessons/lNN_*/widgets.py``."""
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

