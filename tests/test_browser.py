"""JupyterLab in a real browser: Debian's Chromium, driven by Playwright, opens lesson 03, runs every
cell through the Run menu, and checks that a plot and an ipywidgets widget render and that moving the
widget's slider redraws its picture. Screenshots go to tests/.artifacts/ (git-ignored).

CI installs chromium from Debian (.ci/run); Playwright is told to use it (it never downloads its own).
"""
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


def test_lesson_runs_in_jupyterlab_and_its_widget_responds(lab):
    from playwright.sync_api import sync_playwright

    base, root = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            _drive(page, base)
        except Exception:
            _shot(page, "failure")
            raise
        finally:
            browser.close()


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


def _drive(page, base):
    """Open the lesson, run all cells from the Run menu, check the plot and the widget, move its slider."""
    from playwright.sync_api import expect

    page.goto(f"{base}/lab/tree/{LESSON}.ipynb?token={TOKEN}")
    # Wait for the kernel itself: the execution indicator already reads idle while the session is
    # still "No Kernel | Initializing", and a Run All then only raises kernel-selection dialogs.
    expect(page.locator(".jp-Notebook").first).to_be_visible(timeout=60_000)
    expect(page.locator(".jp-Toolbar-kernelName").first).to_have_text(re.compile("ipykernel"), timeout=120_000)
    expect(page.get_by_text(re.compile(r"\(ipykernel\) \| Idle")).first).to_be_visible(timeout=120_000)
    first_prompt = page.locator(".jp-CodeCell .jp-InputPrompt").first
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
    last = page.locator(".jp-CodeCell").last
    expect(last.locator(".jp-OutputArea-output").first).to_be_visible(timeout=240_000)
    tracebacks = page.locator("[data-mime-type='application/vnd.jupyter.error']")
    assert tracebacks.count() == 0, tracebacks.first.inner_text()[:2000]
    assert page.locator(".jp-OutputArea-output img").count() >= 2  # widget picture + roofline
    slider = page.locator(".widget-slider .noUi-handle, .widget-hslider .noUi-handle").first
    expect(slider).to_be_visible(timeout=30_000)
    widget = page.locator(".jupyter-widgets.widget-vbox").first
    widget.scroll_into_view_if_needed()
    picture = widget.locator("img").first
    expect(picture).to_be_visible(timeout=30_000)
    before = picture.get_attribute("src")
    _shot(page, "lesson03_widget_before")
    slider.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    expect(widget.locator(".widget-readout").first).to_have_text("4", timeout=30_000)
    page.wait_for_function(
        "([el, old]) => el.querySelector('img') && el.querySelector('img').src !== old",
                arg=[widget.element_handle(), before], timeout=30_000)
    expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first).to_be_attached(
        timeout=60_000)  # every redraw the three key presses asked for has arrived
    expect(widget.locator(".widget-output img").first).to_be_visible(timeout=30_000)
    _shot(page, "lesson03_widget_after")
    assert picture.get_attribute("src") != before
    page.locator(".jp-OutputArea-output img").last.scroll_into_view_if_needed()
    _shot(page, "lesson03_roofline")
