"""The Colab path, as close as a CPU-only Linux machine gets to it.

A fresh virtualenv holds only what a Colab runtime brings for this course (torch, triton, a Jupyter
kernel) and no kernellab. The notebook is copied alone into an empty folder. The kernel believes it is
on Colab (a ``google.colab`` module is registered at start-up), so the setup cell runs its own pip
install, pointed from the GitHub URL at this repository's current commit (``git+file://...@<sha>``):
the same kind of pinned, non-editable install. Then every cell runs in the interpreter.
"""
import json
import pathlib
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from kernellab._meta import GIT_URL

ROOT = pathlib.Path(__file__).resolve().parents[1]
LESSON = "01_roofline_vector_add"
COLAB_BRINGS = ["torch==2.13.0", "triton", "numpy", "ipykernel"]  # a runtime has these (and more) before setup


def _run(*cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def _versions(py) -> dict:
    out = _run(py, "-c", "import json, torch, triton; print(json.dumps([torch.__version__, triton.__version__]))")
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    if not shutil.which("git"):
        pytest.skip("git is needed to install from a git URL")
    head = _run("git", "-C", ROOT, "rev-parse", "HEAD").strip()
    if _run("git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "autograder", "pyproject.toml"):
        pytest.skip("the package has uncommitted changes: the git install would test an older version")
    base = tmp_path_factory.mktemp("colab")
    venv = base / "venv"
    _run(sys.executable, "-m", "venv", venv)
    py = venv / "bin" / "python"
    _run(py, "-m", "pip", "install", "-q", "--upgrade", "pip", timeout=600)  # Colab's pip is recent; 23.x
    _run(py, "-m", "pip", "install", "-q", *COLAB_BRINGS, timeout=1800)  # rejects git+file URLs with a ref
    with pytest.raises(AssertionError):  # the runtime starts without the course package
        _run(py, "-c", "import kernellab")
    kernels = base / "share"
    _run(py, "-m", "ipykernel", "install", "--prefix", kernels, "--name", "colab-sim")
    ipython = base / "ipython"
    startup = ipython / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-colab.py").write_text(
        "import sys, types\n"
        "sys.modules.setdefault('google', types.ModuleType('google'))\n"
        "sys.modules['google.colab'] = types.ModuleType('google.colab')  # what the setup cell looks for\n")
    return {"py": py, "head": head, "kernels": kernels / "share" / "jupyter", "ipython": ipython, "base": base}


def test_setup_cell_installs_the_pinned_package_and_the_lesson_runs(runtime, monkeypatch):
    py, base = runtime["py"], runtime["base"]
    before = _versions(py)
    work = base / "content"  # Colab's working folder: the notebook and nothing else
    work.mkdir()
    src = ROOT / "solutions" / LESSON / f"{LESSON}.ipynb"
    nb = nbformat.read(str(src), as_version=4)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    assert GIT_URL in setup.source
    setup.source = setup.source.replace(GIT_URL, f"git+file://{ROOT}@{runtime['head']}")
    nbformat.write(nb, str(work / src.name))
    for k in ("PYTHONPATH", "KERNELLAB_CACHE"):  # nothing from the test's own environment leaks in
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("JUPYTER_PATH", str(runtime["kernels"]))
    monkeypatch.setenv("IPYTHONDIR", str(runtime["ipython"]))
    monkeypatch.setenv("HOME", str(base))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("KERNELLAB_STATIC_WIDGETS", "1")  # headless: a widget cell can hang nbclient (nbclient#312)
    nb = nbformat.read(str(work / src.name), as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="colab-sim", allow_errors=False,
                   resources={"metadata": {"path": str(work)}}).execute()
    said = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream")
    assert "no GPU: Triton interpreter on the CPU" in said and "cannot:" in said, said[:2000]
    graded = [c for c in nb.cells if (c.metadata.get("nbgrader") or {}).get("grade")]
    for c in graded:
        text = "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
        assert text.startswith(("✓", "◌")), text
    # Installed from the pinned commit, not editable, and torch/triton left as the runtime had them.
    where = _run(py, "-c", "import kernellab; print(kernellab.__file__)").strip()
    assert str(runtime["base"] / "venv") in where and str(ROOT) not in where, where
    direct = next((runtime["base"] / "venv").glob("lib/python*/site-packages/kernellab-*.dist-info/direct_url.json"))
    info = json.loads(direct.read_text())
    assert info["vcs_info"]["commit_id"] == runtime["head"] and not info.get("dir_info", {}).get("editable")
    assert _versions(py) == before
