"""Rebuild a recorded Triton kernel from its source, for a judge that runs no learner Python.

In the CPU interpreter a kernel is Python that the interpreter executes with ``tl`` patched, so a judge
that replays it runs its body. It does so only after two checks, each enough on its own for what it covers:

1. ``frontend_problem``: Triton's own compiler accepts the kernel. The recorded source, the constexprs and
   argument types of the launch, and the ``@triton.jit`` functions it calls are lowered to Triton IR for a
   CUDA target by the grader's own Triton (no GPU needed). What the compiler refuses is not a Triton kernel,
   whatever the interpreter would have made of it: Python run through the interpreter (``match``/``case``
   class patterns, ``"%s" % tile``, a value's ``handle``) was how kernels escaped into the judge's Python on
   2026-11-28, and the compiler refuses each of those constructs.
2. ``purity_problem``, the first layer, an allow-list of syntax: the language (``tl``, ``triton.language``),
   other recorded ``@triton.jit`` functions, constants and a few builtins - no plain Python helpers, no
   imports, no lambdas, no dunder attributes, nothing from the learner's notebook but the kernel itself.
   Decorators are dropped (the judge wraps the function itself) and default values must be constants. It
   runs first because it reads the source without running anything of it (the compiler's front end
   evaluates constexpr expressions as Python), and because its messages name what is wrong plainly.

Attributes are an allow-list, because the interpreter runs the body as Python in the judge's process: a path
from a language module must stay inside the language (``triton.knobs`` reaches ``re``, whose ``enum`` holds
``builtins``: a red-team kernel called ``exec`` that way and wrote the judge's own reference into its output),
and a value's attribute must be one Triton's tensors, types and descriptors have (an interpreted value's
``handle`` holds a numpy array, on which a kernel could compute outside Triton).
"""
from __future__ import annotations

import ast
import importlib
import inspect
import linecache
import types

from .compat import parse_python
from .triton_frontend import constant_from_json, one_function

# Builtins the Triton compiler itself accepts in a kernel body.
BUILTINS = {"range", "min", "max", "len", "int", "float", "bool", "abs", "print", "isinstance", "enumerate",
            "zip", "tuple", "list", "True", "False", "None"}
# Modules a kernel may name or reach by attribute (each step of a path must be one of them or the language object
# it ends on): the language, its math and libdevice, and ``triton`` itself for these names of it (_FROM_TRITON).
_MODULES = ("triton.language", "triton.language.math", "triton.language.extra", "triton.language.extra.libdevice",
            "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice")
_FROM_TRITON = {"language", "cdiv", "next_power_of_2"}
# Attributes of values a kernel computes: what Triton's tensors, types, constexprs and descriptors define (their
# classes' public names, read when first needed), and the instance attributes kernels read.
_VALUE_INSTANCE_ATTRS = {"element_ty", "primitive_bitwidth", "fp_mantissa_width", "exponent_bias", "int_bitwidth",
                         "int_signedness", "name", "value", "shape", "type", "numel", "strides", "block_shape",
                         "itemsize", "dtype", "T"}
_value_attrs: set = set()
_FORBIDDEN = (ast.Lambda, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ClassDef, ast.Try,
              ast.With, ast.AsyncWith, ast.Yield, ast.YieldFrom, ast.Await, ast.AsyncFunctionDef, ast.Delete,
              ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp, ast.Starred, ast.JoinedStr)


def _function(source: str) -> ast.FunctionDef:
    """The one function a recorded source holds (triton_frontend.one_function), parsed one thread at a time."""
    return one_function(source, parse_python)


def purity_problem(entry: dict) -> str | None:
    """Why a recorded source kernel is not pure Triton, or None when it is."""
    name = entry.get("name", "?")
    try:
        fn = _function(entry["source"])
    except (SyntaxError, ValueError, KeyError) as exc:
        return f"the kernel `{name}` could not be read back ({exc})"
    globs = entry.get("globals", {})
    kernels = entry.get("kernels", {})
    for node in fn.args.defaults + fn.args.kw_defaults:
        if node is not None and not isinstance(node, ast.Constant):
            return f"the kernel `{name}` has a default value that is not a constant"
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    for a in fn.args.args + fn.args.kwonlyargs:
        if a.annotation is not None and not _is_constexpr_annotation(a.annotation):
            return f"the kernel `{name}` annotates `{a.arg}` with something other than tl.constexpr"
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    local = params | stored
    nodes = [n for n in ast.walk(fn) if n is not fn]
    for node in nodes:  # constructs first: they say most plainly what is wrong
        if isinstance(node, ast.Constant) and _spans_lines(node.value):
            return (f"the kernel `{name}` holds a string across lines (line {getattr(node, 'lineno', '?')}), "
                    "which a Triton kernel does not need")
        if isinstance(node, _FORBIDDEN) or isinstance(node, ast.FunctionDef):
            return (f"the kernel `{name}` uses {type(node).__name__.lower()} (line {getattr(node, 'lineno', '?')}), "
                    "which a Triton kernel does not")
    for node in nodes:
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return f"the kernel `{name}` reaches the private attribute `{node.attr}`"
        if isinstance(node, ast.Attribute):
            why = _attribute_problem(node, local, globs)
            if why:
                return f"the kernel `{name}` {why} (line {node.lineno})"
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
            why = _global_problem(node.id, globs, kernels)
            if why:
                return f"the kernel `{name}` {why}"
        if isinstance(node, ast.Call):
            why = _call_problem(node.func, local, globs, kernels)
            if why:
                return f"the kernel `{name}` {why} (line {node.lineno})"
    return None


_LINE_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _spans_lines(value) -> bool:
    """A string or bytes constant with a line break in it (str.splitlines' breaks)."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return isinstance(value, str) and any(c in value for c in _LINE_BREAKS)


def _is_constexpr_annotation(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "constexpr") or (
        isinstance(node, ast.Name) and node.id == "constexpr") or (
        isinstance(node, ast.Constant) and node.value in ("constexpr", "tl.constexpr"))


def _global_problem(name: str, globs: dict, kernels: dict) -> str | None:
    if name.startswith("__"):
        return f"reads `{name}`"
    if name in kernels:
        return None
    g = globs.get(name)
    if g is None:
        return None if name in BUILTINS else f"reads `{name}`, which is neither Triton nor a constant"
    if "module" in g:
        return None if g["module"] in (*_MODULES, "triton") else (
            f"uses the module `{g['module']}`; a kernel may only use triton.language")
    if "const" in g:
        return None
    return f"calls or reads `{name}`, a {g.get('other', 'Python object')}: a Triton kernel may only call @triton.jit functions"


def value_attrs() -> set:
    """Attribute names a kernel may use on its values: the public names of Triton's value and type classes."""
    if not _value_attrs:
        import triton.language as tl
        classes = [tl.tensor, tl.dtype, tl.pointer_type, tl.block_type, tl.constexpr]
        classes += [c for n in dir(tl) if "descriptor" in n and inspect.isclass(c := getattr(tl, n))]
        _value_attrs.update({n for c in classes for n in dir(c) if not n.startswith("_")} | _VALUE_INSTANCE_ATTRS)
    return _value_attrs


def _module_path(node, local: set, globs: dict) -> list | None:
    """``[module name, attr, attr, ...]`` when ``node`` is a dotted path from a global module (``tl.math.exp2``),
    else None (a path from a value the kernel computed, or from a local)."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id not in local and "module" in globs.get(node.id, {}):
        return [globs[node.id]["module"], *reversed(attrs)]
    return None


def _language_object(obj) -> bool:
    """A name of the language a kernel may end a path on: a builtin or @jit function, a type or dtype, a constexpr,
    a constant, or a class or function of triton.language itself (never a module outside ``_MODULES``)."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__ in _MODULES
    if isinstance(obj, (int, float, bool, str)) or obj is None:
        return True
    if getattr(obj, "__triton_builtin__", False):
        return True
    module = getattr(obj if inspect.isclass(obj) or callable(obj) else type(obj), "__module__", "") or ""
    # (in the interpreter the language's builtins are its stand-ins, from triton.runtime.interpreter)
    return module.startswith(("triton.language", "triton.runtime.jit", "triton.runtime.interpreter"))


def _attribute_problem(node: ast.Attribute, local: set, globs: dict) -> str | None:
    """Why the attribute ``node`` is not one a kernel may use, or None. A path from a module is followed in the
    real modules, every step inside the language; any other attribute must be a value attribute."""
    path = _module_path(node, local, globs)
    if path is None:
        if node.attr in value_attrs():
            return None
        return f"reaches `.{node.attr}`, which Triton's values do not have"
    head, *attrs = path
    if head not in _MODULES and head != "triton":
        return f"uses the module `{head}`; a kernel may only use triton.language"
    try:
        obj = importlib.import_module(head)
    except ImportError:
        return f"uses the module `{head}`, which the judge cannot import"
    where = head
    for i, attr in enumerate(attrs):
        if where == "triton" and attr not in _FROM_TRITON:
            return f"reaches `triton.{attr}`, which is not the language"
        if not hasattr(obj, attr):
            return f"reaches `{where}.{attr}`, which does not exist"
        obj = getattr(obj, attr)
        where = f"{where}.{attr}"
        if not _language_object(obj):
            return f"reaches `{where}`, which is not part of the Triton language"
        if not isinstance(obj, types.ModuleType):  # past the modules: what follows is a value's attribute
            rest = attrs[i + 1:]
            bad = [a for a in rest if a not in value_attrs()]
            return f"reaches `.{bad[0]}` of `{where}`" if bad else None
    return None


def _call_problem(func, local: set, globs: dict, kernels: dict) -> str | None:
    if isinstance(func, ast.Name):
        if func.id in local:
            return f"calls `{func.id}`, a local value"
        if func.id in kernels or func.id in BUILTINS:
            return None
        g = globs.get(func.id, {})
        return f"calls `{func.id}`, which is not a @triton.jit function" if "const" in g or "module" in g else None
    if isinstance(func, ast.Attribute):  # tl.xxx or a value's method: every attribute is checked on its own
        return None  # (_attribute_problem), and the name it starts from too (_global_problem)
    return "calls something that is not a named Triton function"


def build(entries: dict, kid: str, made: dict | None = None):
    """The interpreted kernel ``kid`` (and the kernels it calls), built from checked source."""
    import triton
    import triton.language as tl

    made = {} if made is None else made
    if kid in made:
        return made[kid]
    entry = entries[kid]
    why = purity_problem(entry)
    if why:
        raise ValueError(why)
    fn_ast = _function(entry["source"])
    fn_ast.decorator_list = []
    module = ast.Module(body=[fn_ast], type_ignores=[])
    filename = f"<kernellab-replay-{kid}>"
    text = ast.unparse(module) + "\n"
    lines = text.splitlines()
    if not lines or not lines[0].startswith("def ") or \
            any(line.lstrip().startswith(("def ", "@", "class ")) for line in lines[1:]):
        raise ValueError(f"the kernel `{entry['name']}` does not read back as one function")
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)  # Triton reads the source
    namespace = {"triton": triton, "tl": tl, "__builtins__": __builtins__}
    for name, g in entry.get("globals", {}).items():
        if "module" in g:
            namespace[name] = importlib.import_module(g["module"])
        elif "const" in g:
            namespace[name] = constant_from_json(g["const"])
    made[kid] = None
    for name, inner in entry.get("kernels", {}).items():
        namespace[name] = build(entries, inner, made)
    exec(compile(text, filename, "exec"), namespace)  # a def of checked, pure-Triton source; runs no body
    kernel = triton.jit(namespace[entry["name"]])
    made[kid] = kernel
    return kernel




# ---------------------------------------------------------------- Triton's own front end

_VERDICTS: dict = {}  # (kernels, kernel id, launch arguments) as JSON -> why refused, or None: this process's answers


def _verdict_key(entries: dict, launch: dict) -> str:
    import json
    return json.dumps([entries, launch["kernel"], sorted(dict(launch["args"]).items())], sort_keys=True, default=str)


def frontend_problems(entries: dict, launches: list, timeout_s: float = 120.0) -> dict:
    """{(kernel id, launch index): why} for the recorded launches whose kernel Triton's own compiler refuses as
    launched (triton_frontend.py), empty when it accepts them all. The compiler runs in a process of its own
    started with Triton not in interpreter mode: in this one, Triton's library of @jit functions (tl.sigmoid,
    tl.max's combine, ...) are the interpreter's, which the compiler cannot lower. That process inherits this
    one's confinement (a judge that interprets is confined before it replays); ``-I`` keeps the script's folder
    (kernellab's modules) and the environment's Python variables out of its imports. Answers are kept for this
    process: a judge asks once for all its records, in its compile phase (judge.py), and its replays find them."""
    import json
    import os
    import subprocess
    import sys

    from . import triton_frontend
    keys = [_verdict_key(entries, e) for e in launches]
    todo = [{"kernel": e["kernel"], "args": dict(e["args"])} for e, k in zip(launches, keys) if k not in _VERDICTS]
    todo_keys = [k for k in keys if k not in _VERDICTS]
    if todo:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        try:
            out = subprocess.run([sys.executable, "-I", triton_frontend.__file__], input=json.dumps(
                {"entries": entries, "launches": todo}), capture_output=True, text=True, timeout=timeout_s, env=env)
            answer = json.loads(out.stdout.strip().splitlines()[-1])
        except (subprocess.TimeoutExpired, ValueError, IndexError, OSError) as exc:
            answer = {str(i): f"Triton's compiler could not be asked about the kernel ({type(exc).__name__})"
                      for i in range(len(todo))}
        for i, k in enumerate(todo_keys):
            _VERDICTS[k] = str(answer[str(i)])[:400] if str(i) in answer else None
    return {(e["kernel"], i): _VERDICTS[k] for i, (e, k) in enumerate(zip(launches, keys)) if _VERDICTS[k]}


__all__ = ["BUILTINS", "build", "constant_from_json", "frontend_problems", "purity_problem"]
