"""The package's layers (docs/ARCHITECTURE.md): no import circles, no import from a higher layer, grading/
never imports the benchmark or the command line, and every lesson folder has the same files.

Every ``import`` and ``from ... import`` statement anywhere in a module counts (function-level ones too),
relative ones resolved. Run: ``python -m pytest tests/test_architecture.py -q``.
"""
from __future__ import annotations

import ast
import fnmatch
import pathlib

PACKAGE = "kernellab"
ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE = ROOT / "autograder" / PACKAGE

# (layer, name, module patterns relative to ``kernellab``; "" is the package itself). A module may import from
# its own layer and the layers below. Where several patterns match a module, the longest one decides
# (``lessons.*.bench`` is a benchmark although it lives in a lesson folder). docs/ARCHITECTURE.md shows this
# table row for row; test_the_document_shows_the_layer_table keeps the two the same.
LAYERS = [
    (0, "device", ["_env", "_meta", "compat", "device"]),
    (1, "core", ["compare", "guarded", "invoke", "reads", "watch", "traffic", "code_rules", "paths",
                 "widgets_base", "record", "replay", "op_rules", "kernel_source", "triton_frontend",
                 "notebook_source"]),
    (2, "problems", ["problems", "problems.*"]),
    (3, "measure", ["timing", "ceilings", "roofline", "sweeps", "profiling", "tuning", "launch", "report", "learner"]),
    (4, "lessons", ["", "lessons", "lessons.answers", "lessons.attention", "lessons.l*", "lessons.*.problems", "lessons.*.widgets",
                    "widgets"]),
    (5, "notebook cells", ["notebook_cells"]),
    (6, "grading", ["grading", "grading.*"]),
    (7, "bench", ["bench", "lessons.*.bench", "gpu_report"]),
    (8, "cli", ["build", "cli"]),
]
# grading/ must not reach these, whatever their layer
NOT_FROM_GRADING = ["bench", "lessons.*.bench", "gpu_report", "build", "cli"]
# The judge side of the grade of record (grading/judge/: the grading process, the judge, the store) must not reach
# what executes notebook cells or is the worker's. The zygote is not followed: it forks workers as well as judges
# and imports the worker's modules to warm them, but runs neither a cell nor a judge's code itself.
JUDGE_SIDE = "grading.judge*"
EXECUTES_CELLS = ["notebook_cells", "grading.worker*"]
NOT_FOLLOWED = ["grading.processes.zygote"]
LESSON_FILES = ("__init__.py", "problems.py", "bench.py", "widgets.py")


def _short(module: str) -> str:
    return module[len(PACKAGE) + 1:] if module.startswith(PACKAGE + ".") else ("" if module == PACKAGE else module)


def _matches(module: str, patterns) -> list[str]:
    return [p for p in patterns if fnmatch.fnmatchcase(_short(module), p)]


def layer_of(module: str, layers=LAYERS) -> tuple[int, str] | None:
    """(layer, name) of a module, by its longest matching pattern; None if no pattern matches."""
    best = None
    for number, name, patterns in layers:
        for p in _matches(module, patterns):
            if best is None or len(p) > len(best[0]):
                best = (p, number, name)
    return None if best is None else best[1:]


def modules(source: pathlib.Path = SOURCE) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every .py file of the package."""
    out = {}
    for path in sorted(source.rglob("*.py")):
        parts = list(path.relative_to(source.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(module: str, path: pathlib.Path, known) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file: ``from P import n`` counts as
    P.n where that is a module, else as P; a name that is no module counts as its nearest module above."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module
            targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    out = set()
    for t in targets:
        while t and t not in known:
            t = t.rpartition(".")[0]
        if t and t != module and (t == PACKAGE or t.startswith(PACKAGE + ".")):
            out.add(t)
    return out


def import_graph(source: pathlib.Path = SOURCE) -> dict[str, set[str]]:
    mods = modules(source)
    return {m: imports_of(m, p, mods) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected group of two or more modules, sorted (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def violations(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every broken rule, one sentence each, naming the modules."""
    found = []
    for group in cycles(graph):
        found.append("import circle: " + " <-> ".join(group))
    for module in sorted(graph):
        mine = layer_of(module, layers)
        if mine is None:
            found.append(f"{module} is in no layer: add it to LAYERS (tests/test_architecture.py) and "
                         "docs/ARCHITECTURE.md")
            continue
        for target in sorted(graph[module]):
            theirs = layer_of(target, layers)
            if theirs is not None and theirs[0] > mine[0]:
                found.append(f"{module} (layer {mine[0]}, {mine[1]}) imports {target} from a higher layer "
                             f"({theirs[0]}, {theirs[1]})")
            if _short(module).startswith("grading") and _matches(target, NOT_FROM_GRADING):
                found.append(f"{module} imports {target}: grading/ never imports the benchmark or the CLI")
    return found


def test_the_package_keeps_its_layers():
    problems = violations(import_graph())
    assert not problems, "\n".join(problems)


def judge_side_reaches(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Judge-side module -> the modules it reaches that execute cells (through any chain of imports)."""
    out = {}
    for start in graph:
        if not _matches(start, [JUDGE_SIDE]):
            continue
        seen, todo = set(), [start]
        while todo:
            for m in graph.get(todo.pop(), ()):
                if m not in seen and not _matches(m, NOT_FOLLOWED):
                    seen.add(m)
                    todo.append(m)
        bad = sorted(m for m in seen if _matches(m, EXECUTES_CELLS))
        if bad:
            out[start] = bad
    return out


def test_the_judge_side_never_imports_what_executes_learner_cells():
    graph = import_graph()
    assert any(_matches(m, [JUDGE_SIDE]) for m in graph)
    assert judge_side_reaches(graph) == {}
    # and the check sees such an import where there is one
    planted = {k: set(v) for k, v in graph.items()}
    planted["kernellab.grading.judge.store"].add("kernellab.lessons")
    planted.setdefault("kernellab.lessons", set()).add("kernellab.notebook_cells")
    assert judge_side_reaches(planted)["kernellab.grading.judge.store"] == ["kernellab.notebook_cells"]


def test_every_lesson_folder_has_the_same_files():
    folders = sorted(p for p in (SOURCE / "lessons").iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert folders
    missing = [f"lessons/{d.name}/{f}" for d in folders for f in LESSON_FILES if not (d / f).exists()]
    assert not missing, "lesson folders lack: " + ", ".join(missing)


def test_the_lesson_table_names_the_folders():
    import kernellab.lessons as lessons
    on_disk = {p.name for p in (SOURCE / "lessons").iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert set(lessons.FOLDERS.values()) == on_disk
    for lid, alias in lessons.LESSONS.items():  # the notebooks' names reach the folder's problems.py
        assert getattr(lessons, alias) is lessons.lesson_module(lid)
        assert lessons.lesson_module(lid).__name__ == f"kernellab.lessons.{lessons.FOLDERS[lid]}.problems"


def test_the_document_shows_the_layer_table():
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    for number, name, patterns in LAYERS:
        row = f"| {number} | {name} | " + ", ".join(f"`{p or PACKAGE}`" for p in patterns) + " |"
        assert row in doc, f"docs/ARCHITECTURE.md lacks the row {row}"


def test_the_checker_reports_a_circle_an_upward_import_and_grading_reaching_the_bench():
    layers = [(0, "low", ["a", "b"]), (1, "mid", ["grading.*"]), (2, "high", ["bench", "c"])]
    graph = {"kernellab.a": {"kernellab.b"}, "kernellab.b": {"kernellab.a", "kernellab.c"}, "kernellab.c": set(),
             "kernellab.grading.x": {"kernellab.bench"}, "kernellab.bench": set(), "kernellab.stray": set()}
    found = violations(graph, layers)
    assert "import circle: kernellab.a <-> kernellab.b" in found
    assert any(f.startswith("kernellab.b (layer 0, low) imports kernellab.c from a higher layer (2, high)")
               for f in found), found
    assert any("kernellab.grading.x imports kernellab.bench: grading/ never imports" in f for f in found), found
    assert any(f.startswith("kernellab.stray is in no layer") for f in found), found
    assert len(found) == 5, found  # the circle, b -> c, grading.x -> bench (upward and forbidden), stray


def test_imports_are_resolved_relative_and_function_level(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from .sub import deep\n")
    (pkg / "sub" / "__init__.py").write_text("from .. import low\n")
    (pkg / "sub" / "deep.py").write_text("import kernellab.low\nfrom ..low import f\n")
    graph = import_graph(pkg)
    assert graph == {PACKAGE: set(), f"{PACKAGE}.low": {f"{PACKAGE}.sub.deep"},
                     f"{PACKAGE}.sub": {f"{PACKAGE}.low"}, f"{PACKAGE}.sub.deep": {f"{PACKAGE}.low"}}
    assert cycles(graph) == [[f"{PACKAGE}.low", f"{PACKAGE}.sub.deep"]]
