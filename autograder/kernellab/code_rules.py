"""What graded code may use, read off its source before it runs.

The grade of record runs learner code in a child process next to the grader's own code. Python cannot
hide one from the other, so graded cells keep to what a kernel exercise needs: torch, triton and a few
plain modules; no private (``_``-prefixed) APIs that switch the op watch off; no reflection that reaches
the grader's data; no replacing library functions. The learner's own checks apply the same rules, so a
notebook hears about a broken rule before it is graded.
"""
from __future__ import annotations

import ast

from .compat import parse_python

# Modules a graded cell may import (and their submodules).
ALLOWED_IMPORTS = ("torch", "triton", "math", "numpy", "functools", "itertools", "typing", "dataclasses",
                   "collections", "warnings", "operator", "enum", "kernellab", "time", "random", "statistics",
                   "contextlib")
# Parts of torch a graded function has no use for: other threads and processes, compilers, graphs.
FORBIDDEN_TORCH = {"multiprocessing", "jit", "compile", "compiler", "distributed", "futures", "hub", "package", "graph",
                   "graphs", "CUDAGraph", "make_graphed_callables", "cpp_extension", "load_inline"}
# Builtins that reach data or code by name, or the file system.
FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "getattr",
                      "setattr", "delattr", "open", "breakpoint", "memoryview"}
# Dunder attributes a kernel exercise uses (super().__init__(...), a class's own __call__).
ALLOWED_DUNDERS = {"__init__", "__call__", "__name__", "__doc__"}
# Names the setup cell binds to modules: assigning to their attributes replaces library code.
MODULE_NAMES = {"torch", "triton", "tl", "F", "L", "kl", "math", "np", "numpy", "nn", "functools", "itertools",
                "warnings", "collections", "operator", "typing", "dataclasses", "enum"}


# Module attributes that many libraries re-export (torch.os, numpy.sys ...): the file system, processes and
# the interpreter's internals, whatever object they are reached through.
FORBIDDEN_ATTRS = {"os", "sys", "subprocess", "gc", "ctypes", "inspect", "importlib", "builtins", "threading",
                   "shutil", "pathlib", "io", "pickle", "socket", "signal", "resource", "tempfile", "glob"}


class _Scan(ast.NodeVisitor):
    def __init__(self, own: set, imported: set):
        self.own = own  # names the learner's code binds itself
        self.imported = imported  # names it binds by import: modules, whose attributes are not its own
        self.broken: list[str] = []
        self.seen: set = set()

    def _say(self, node, what: str) -> None:
        self.broken.append(f"line {getattr(node, 'lineno', '?')}: {what}")

    def visit_Import(self, node):
        for a in node.names:
            if a.name.split(".")[0] not in ALLOWED_IMPORTS:
                self._say(node, f"imports {a.name}")
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if node.level or mod.split(".")[0] not in ALLOWED_IMPORTS:
            self._say(node, f"imports from {'.' * node.level}{mod}")
        for a in node.names:
            if a.name.startswith("_"):
                self._say(node, f"imports the private name {a.name} from {mod}")
        # from torch import compile / from torch.cuda import graphs: the same parts of torch, by another name
        parts = set(mod.split(".")[1:]) | {a.name for a in node.names}
        if mod.split(".")[0] == "torch" and FORBIDDEN_TORCH & parts:
            self._say(node, f"uses torch.{'/'.join(sorted(FORBIDDEN_TORCH & parts))}")
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in FORBIDDEN_BUILTINS and node.id not in self.own:
            self._say(node, f"calls {node.id}()")
        elif node.id.startswith("__") and node.id not in ALLOWED_DUNDERS:
            self._say(node, f"uses {node.id}")
        self.generic_visit(node)

    def visit_Attribute(self, node):
        name = node.attr
        if name.startswith("__") and name.endswith("__"):
            if name not in ALLOWED_DUNDERS:
                self._say(node, f"reads .{name}")
        elif name.startswith("_") and name not in self.own:
            self._say(node, f"uses the private API .{name}")
        if name in FORBIDDEN_ATTRS:
            self._say(node, f"reaches the module .{name}")
        chain, root = [name], node.value
        while isinstance(root, ast.Attribute):
            chain.append(root.attr)
            root = root.value
        bad = FORBIDDEN_TORCH & set(chain)
        if isinstance(root, ast.Name) and root.id == "torch" and bad and (node.lineno, *bad) not in self.seen:
            self.seen.add((node.lineno, *bad))  # once per chain: torch.jit.fork reports torch.jit once
            self._say(node, f"uses torch.{'/'.join(sorted(bad))}")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and (root.id in MODULE_NAMES or root.id in self.imported):
                self._say(node, f"replaces {ast.unparse(node)}")
        self.generic_visit(node)


def _own_names(tree) -> tuple[set, set]:
    """(names the code binds: defs, classes, arguments, assignment targets and attribute names it assigns;
    names it binds by import)."""
    own, imported = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(n.name)
        elif isinstance(n, ast.arg):
            own.add(n.arg)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            own.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            own.add(n.attr)  # ctx._saved = ... makes ._saved the learner's own
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                imported.add((a.asname or a.name).split(".")[0])
    return own - imported, imported


def broken_rules(sources: list[str]) -> list[str]:
    """What in ``sources`` (Python, as the cells run) graded code may not do; empty when nothing."""
    trees = []
    for src in sources:
        try:
            trees.append(parse_python(src))
        except SyntaxError:
            continue  # reported where the cell is run
    own, imported = set(), set()
    for t in trees:
        o, i = _own_names(t)
        own |= o
        imported |= i
    # An attribute the learner assigns on an imported module is not thereby their own.
    scan = _Scan(own, imported)
    for t in trees:
        scan.visit(t)
    return scan.broken


def explain(broken: list[str], what: str = "Your code") -> str | None:
    """One paragraph naming the first broken rules, or None."""
    if not broken:
        return None
    shown = "; ".join(broken[:3]) + (f"; and {len(broken) - 3} more" if len(broken) > 3 else "")
    return (f"{what} does something graded code may not do ({shown}). Graded cells may import only "
            f"{', '.join(ALLOWED_IMPORTS)}; they may not use private APIs (names starting with _), reflection "
            "(getattr, globals, eval, exec, __dict__ ...), files, threads or processes, and may not replace "
            "library functions. These rules keep the grader's own code and data out of reach.")


# File names under which notebook cells are registered: ipykernel's, IPython's, and exec_cells' (the child).
_CELL_FILES = ("ipykernel_", "<ipython-input", "<kernellab-")


def cell_source_of(obj) -> str | None:
    """The source of the notebook cell that defined ``obj`` (a function, or a class such as an autograd
    Function), or None when it was not defined in a cell (a test module, a library): IPython registers
    every cell's text under its file name."""
    import inspect
    import linecache
    code = getattr(obj, "__code__", None)
    if code is None and inspect.isclass(obj):
        for v in vars(obj).values():
            f = getattr(v, "__func__", v)
            if getattr(f, "__code__", None) is not None:
                code = f.__code__
                break
    if code is None or not any(tag in code.co_filename for tag in _CELL_FILES):
        return None
    return "".join(linecache.getlines(code.co_filename)) or None
