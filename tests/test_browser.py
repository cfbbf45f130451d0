"""JupyterLab in a real browser: Debian's Chromium, driven by Playwright, opens lesson 03, runs every
cell through the Run menu, and checks that a plot and an ipywidgets widget render and that moving the
widget's slider redraws its picture. A second notebook does the same for the widgets of lessons 01, 05
and 06 (the roofline explorer, the backward kernels' tiles, a kernel's payoff). Screenshots go to
tests/.artifacts/ (git-ignored).

CI installs chromium from Debian (.ci/run); Playwright is told to use it (it never downloads its own).
"""
import contextlib
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LESSON = "03_fused_softmax_layernorm"
ARTIFACTS = ROOT / "tests" / ".artifacts"
TOKEN = "kernellab-browser-test"


def _chromium():
    return next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if _chromium() is None:
        pytest.skip("no chromium on this machine (CI installs Debian's: see .ci/run)")
    pytest.importorskip("playwright")
    root = tmp_path_factory.mktemp("lab")
    shutil.copy(ROOT / "solutions" / LESSON / f"{LESSON}.ipynb", root / f"{LESSON}.ipynb")
    # Render every cell (JupyterLab 4 only renders the cells in view by default), and no news pop-up.
    settings_dir = tmp_path_factory.mktemp("lab-settings")  # outside the file browser's root
    settings = settings_dir / "@jupyterlab"
    (settings / "notebook-extension").mkdir(parents=True)
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    (settings / "apputils-extension").mkdir()
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port = _free_port()
    env = dict(os.environ, KERNELLAB_FORCE_CPU="1", HOME=str(root),
               PYTHONPATH=str(ROOT / "autograder") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
           f"--LabApp.user_settings_dir={settings_dir}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(root / "jupyterlab.log", "wb")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError("JupyterLab did not start:\n" + (root / "jupyterlab.log").read_text()[-3000:])
        yield base, root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=False)


@contextlib.contextmanager
def _page(failure_shot: str):
    """A page of headless Chromium; a screenshot named ``failure_shot`` if the test fails in it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            yield page
        except Exception:
            _shot(page, failure_shot)
            raise
        finally:
            browser.close()


def test_lesson_runs_in_jupyterlab_and_its_widget_responds(lab):
    base, _ = lab
    with _page("failure") as page:
        _drive(page, base)


# The toolbar and the status bar once a kernel is up, whatever its display name ("Python 3 (ipykernel)"
# here, "Python 3 (KernelLab)" where scripts/setup.sh installs the kernel, as in CI).
KERNEL_NAMED = re.compile(r"^(?!\s*No Kernel)\s*\S")
KERNEL_IDLE = re.compile(r"^(?!No Kernel)[^|]+ \| Idle\s*$")
# Dialogs JupyterLab may raise on a slow machine, and what to do with each: accept the kernel it offers
# (a Run All that arrives while the session is still "No Kernel | Initializing" asks, once per queued
# cell, which kernel to start); anything else is a real fault, reported with the dialog's own words.
_ACCEPT = re.compile(r"kernel", re.I)
_FATAL = re.compile(r"died|restarting|error|failed|not found", re.I)


def _settle_dialogs(page, seen):
    """Answer or report any open JupyterLab dialog, so that none silently blocks the next click."""
    for _ in range(40):
        dialog = page.locator(".jp-Dialog")
        if dialog.count() == 0 or not dialog.first.is_visible():
            return
        text = " ".join(dialog.first.inner_text().split())[:500]
        seen.append(text)
        if _FATAL.search(text) or not _ACCEPT.search(text):
            raise AssertionError(f"JupyterLab raised a dialog: {text!r}")
        if len(seen) == 1:
            _shot(page, "dialog")
        dialog.first.locator(".jp-Dialog-button.jp-mod-accept").click()
        time.sleep(0.5)
    raise AssertionError(f"JupyterLab kept raising dialogs: {seen}")


def _open_and_run_all(page, base, name):
    """Open ``name`` in JupyterLab, wait for its kernel, run every cell from the Run menu and wait until the
    last code cell has output; fail on any traceback."""
    from playwright.sync_api import expect

    # ?reset: a fresh workspace, so no tab of an earlier test is restored next to this one.
    page.goto(f"{base}/lab/tree/{name}?reset&token={TOKEN}")
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")  # the notebook in view
    # Wait for the kernel itself: the execution indicator already reads idle while the session is
    # still "No Kernel | Initializing", and a Run All then only raises kernel-selection dialogs.
    expect(panel.locator(".jp-Notebook")).to_be_visible(timeout=60_000)
    expect(panel.locator(".jp-Toolbar-kernelName")).to_have_text(KERNEL_NAMED, timeout=120_000)
    expect(page.get_by_text(KERNEL_IDLE).first).to_be_visible(timeout=120_000)
    first_prompt = panel.locator(".jp-CodeCell .jp-InputPrompt").first
    dialogs = []
    for attempt in range(4):  # before the kernel's connection is up, Run All only moves the selection
        _settle_dialogs(page, dialogs)
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        try:
            _settle_dialogs(page, dialogs)
            expect(first_prompt).to_have_text(re.compile(r"\[(\*|\d+)\]"), timeout=15_000)
            break
        except AssertionError:
            if attempt == 3:
                raise AssertionError(f"Run All never started the cells; dialogs seen: {dialogs}") from None
    # The last code cell prints the going-further table: when it has output, every cell has run.
    last = panel.locator(".jp-CodeCell").last
    expect(last.locator(".jp-OutputArea-output").first).to_be_visible(timeout=240_000)
    tracebacks = panel.locator("[data-mime-type='application/vnd.jupyter.error']")
    assert tracebacks.count() == 0, tracebacks.first.inner_text()[:2000]
    return panel


# A digest of the bytes a widget's picture shows, once it has loaded (None before): an Image widget's src is a
# blob URL made afresh whenever its view renders, so a new src alone does not mean a new picture.
_DIGEST_JS = """async (el) => {
  const img = el.querySelector('img.widget-image');
  if (!img || !img.complete || !img.naturalWidth) return null;
  const bytes = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
  let h = bytes.length;
  for (let i = 0; i < bytes.length; i++) h = (Math.imul(h, 31) + bytes[i]) >>> 0;
  return `${bytes.length}:${h}`;
}"""


def _picture_digest(widget):
    return widget.element_handle().evaluate(_DIGEST_JS)


def _wait_for_new_picture(page, widget, before, timeout_s: float = 60.0) -> bool:
    """Until the widget shows a loaded picture whose bytes differ from ``before`` (a digest) and stay the same for
    1.5 s, decoded and painted; False on timeout. Settled, not first changed: a slider whose start is off its step
    grid is snapped by the browser, and that redraw can arrive just before the one a key press asked for."""
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = _picture_digest(widget)
        if now != last:
            last, since = now, time.monotonic()
        elif now is not None and now != before and time.monotonic() - since >= 1.5:
            widget.element_handle().evaluate(
                "async el => { await el.querySelector('img.widget-image').decode();"
                " await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); }")
            return True
        page.wait_for_timeout(250)
    return False


def _drive(page, base):
    """Open the lesson, run all cells from the Run menu, check the plot and the widget, move its slider."""
    from playwright.sync_api import expect

    panel = _open_and_run_all(page, base, f"{LESSON}.ipynb")
    assert panel.locator(".jp-OutputArea-output img").count() >= 2  # widget picture + roofline
    slider = panel.locator(".widget-slider .noUi-handle, .widget-hslider .noUi-handle").first
    expect(slider).to_be_visible(timeout=30_000)
    widget = panel.locator(".jupyter-widgets.widget-vbox").first
    widget.scroll_into_view_if_needed()
    picture = widget.locator("img.widget-image").first
    expect(picture).to_be_visible(timeout=30_000)
    page.wait_for_function("el => { const i = el.querySelector('img.widget-image'); return i && i.complete; }",
                           arg=widget.element_handle(), timeout=30_000)
    before = _picture_digest(widget)
    _shot(page, "lesson03_widget_before")
    slider.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    expect(widget.locator(".widget-readout").first).to_have_text("4", timeout=30_000)
    assert _wait_for_new_picture(page, widget, before, 30.0), "lesson 03: its slider moved, no new picture in 30 s"
    expect(panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_be_attached(
        timeout=60_000)  # every redraw the three key presses asked for has arrived
    expect(widget.locator("img.widget-image")).to_have_count(1, timeout=30_000)
    _shot(page, "lesson03_widget_after")
    panel.locator(".jp-OutputArea-output img").last.scroll_into_view_if_needed()
    _shot(page, "lesson03_roofline")


# The newer widgets, each in its own cell, on a made-up profile for lesson 06 (its real one takes a
# minute to measure on a CPU). As in the lessons, each call ends with ";": the helper displays its widget
# itself, and a bare call would show it a second time as the cell's value.
WIDGETS_NB = "widgets.ipynb"
WIDGET_CELLS = {
    "roofline_explorer": "from kernellab.lessons import lesson01\nlesson01.roofline_explorer();",
    "backward_tiles": "from kernellab.lessons import lesson05\nlesson05.backward_tiles();",
    "kernel_payoff": ("from types import SimpleNamespace as Row\nfrom kernellab.lessons import lesson06\n"
                      "lesson06.kernel_payoff([Row(op='aten::mm', share=0.5), Row(op='aten::_softmax', share=0.2),\n"
                      "                        Row(op='aten::native_layer_norm', share=0.1)]);"),
}


def _write_widgets_notebook(root):
    import nbformat
    cells = [nbformat.v4.new_code_cell("import kernellab as kl\ndevice = kl.setup()")]
    cells += [nbformat.v4.new_code_cell(src) for src in WIDGET_CELLS.values()]
    cells.append(nbformat.v4.new_code_cell("print('all widgets drawn')"))
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    nbformat.write(nb, root / WIDGETS_NB)


def test_every_newer_widget_responds_in_jupyterlab(lab):
    from playwright.sync_api import expect

    base, root = lab
    _write_widgets_notebook(root)
    with _page("failure_widgets") as page:
        cells = _open_and_run_all(page, base, WIDGETS_NB).locator(".jp-CodeCell")
        for i, name in enumerate(WIDGET_CELLS, start=1):
            widget = cells.nth(i).locator(".jupyter-widgets.widget-vbox").first
            expect(widget).to_be_visible(timeout=60_000)
            widget.scroll_into_view_if_needed()
            picture = widget.locator("img.widget-image").first
            expect(picture).to_be_visible(timeout=60_000)
            page.wait_for_function("el => { const i = el.querySelector('img.widget-image'); return i && i.complete; }",
                                   arg=widget.element_handle(), timeout=60_000)
            before = _picture_digest(widget)
            readout = widget.locator(".widget-readout").last
            shown = readout.inner_text()
            slider = widget.locator(".noUi-handle").last  # each widget's last slider: step, speedup, intensity
            slider.focus()
            page.keyboard.press("ArrowRight")  # one step: one redraw
            expect(readout).not_to_have_text(shown, timeout=30_000)
            if not _wait_for_new_picture(page, widget, before):  # say which widget and where its slider went
                raise AssertionError(f"{name}: its slider moved from {shown!r} to {readout.inner_text()!r}, but no "
                                     "new picture came within 60 s")
            expect(page.get_by_text(KERNEL_IDLE).first).to_be_visible(
                timeout=60_000)  # the last redraw has arrived
            # one picture: the widget's image is replaced, never added to
            expect(widget.locator("img.widget-image")).to_have_count(1, timeout=30_000)
            page.wait_for_timeout(2000)  # headless Chromium rasters a large picture over several frames
            _shot(page, f"widget_{name}")
