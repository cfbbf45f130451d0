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


def _picture(render, kwargs: dict) -> bytes:
    """PNG bytes of the figure ``render(**kwargs)`` draws (the last it makes); every figure it made is closed."""
    import io

    import matplotlib.pyplot as plt
    before = set(plt.get_fignums())
    try:
        render(**kwargs)
    finally:
        made = [n for n in plt.get_fignums() if n not in before]
        buf = io.BytesIO()
        if made:
            plt.figure(made[-1]).savefig(buf, format="png", bbox_inches="tight")
        for n in made:
            plt.close(n)
    return buf.getvalue()


def _interactive(render, build, static=()):
    """Draw ``render`` under ipywidgets controls, or once with the ``static`` arguments where no widget can be
    shown (see _widgets). ``render`` draws one matplotlib figure and does not show it. ``build(w)`` makes the
    controls from the ipywidgets module ``w`` and returns ({render's argument: its widget}, [rows of widgets to
    lay out]). Returns the widget box (the rows, the picture, a line for a drawing error), or None.

    The picture is an Image widget whose PNG the kernel replaces, not an Output widget that captures a shown
    figure: an Output widget keeps only output whose parent message matches the id it was given, and a redraw
    run from a slider's message could lose its picture that way (CI, 2026-11-25 and -26: a slider moved, no
    new picture came; ipywidgets issue 4020 is this mismatch under ipykernel 7). A trait update has no parent
    to match."""
    import matplotlib.pyplot as plt
    ui = _widgets()
    if ui is None:  # one static picture
        render(*static)
        plt.show()
        return None
    w, display = ui
    args, rows = build(w)
    picture, note = w.Image(format="png"), w.HTML()

    def redraw(_change=None):
        try:
            picture.value = _picture(render, {k: c.value for k, c in args.items()})
            note.value = ""
        except Exception as e:  # a learner's argument the picture cannot draw: say so under the last one
            import html
            note.value = f"<pre>could not draw this: {html.escape(f'{type(e).__name__}: {e}')}</pre>"

    for control in args.values():
        control.observe(redraw, "value")
    redraw()
    box = w.VBox([w.HBox(row) for row in rows] + [picture, note])
    display(box)
    return box
