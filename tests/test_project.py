"""The project's own files: environment.yml and pyproject.toml agree; the README's commands exist."""
import pathlib
import re
import tomllib

import yaml

from kernellab._meta import colab_url

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch"}  # PyPI name -> conda-forge name


def _name(req: str) -> str:
    return re.split(r"[<>=!~ \[]", req.strip(), maxsplit=1)[0].lower()


def test_environment_yml_names_the_same_runtime_dependencies_as_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())
    conda = {_name(d) for d in env["dependencies"] if isinstance(d, str)}
    needed = {CONDA_NAMES.get(_name(d), _name(d)) for d in py["project"]["dependencies"]}
    needed |= {_name(d) for d in py["project"]["optional-dependencies"]["course"]}
    assert needed <= conda, needed - conda
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip


def test_readme_names_the_two_commands_and_every_lesson_with_a_badge():
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/test.sh" in readme and "bash scripts/start.sh" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci and "bash scripts/start.sh" in ci
    from kernellab.lessons import LESSONS
    for lesson in LESSONS:
        assert colab_url(lesson) in readme
    assert "hidden" in readme.lower() and "secret" in readme.lower()


def test_readme_layout_names_what_is_there():
    """The README's layout table: every path it names exists, and scripts/ holds only the three it names."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Layout"):]
    paths = re.findall(r"^\| `([^`]+)` \|", table, re.M)
    assert len(paths) >= 8
    for path in paths:
        assert (ROOT / path).exists(), path
    assert sorted(p.name for p in (ROOT / "scripts").iterdir()) == ["setup.sh", "start.sh", "test.sh"]


def test_no_notebook_markdown_holds_a_control_character():
    """A JSON escape that ate a LaTeX backslash ("\\times" written as "\times") leaves a TAB, backspace,
    form feed or carriage return in the text the learner reads."""
    import json
    bad = []
    for nb_path in sorted((ROOT / "solutions").glob("*/*.ipynb")) + sorted((ROOT / "notebooks").glob("*/*.ipynb")):
        for i, cell in enumerate(json.loads(nb_path.read_text())["cells"]):
            if cell["cell_type"] != "markdown":
                continue
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            for m in re.finditer(r"[\x00-\x09\x0b-\x1f\x7f]", text):
                bad.append(f"{nb_path.relative_to(ROOT)} cell {i}: {text[max(0, m.start() - 20):m.end() + 20]!r}")
    assert not bad, "\n".join(bad)
