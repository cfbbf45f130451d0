"""Does Triton's own compiler accept a recorded kernel? Its front end, run in a process of its own.

A judge that replays in Triton's interpreter runs each recorded kernel's body as Python. Before it does, the
recorded source - with the constexprs and argument types of each launch, and the ``@triton.jit`` functions it
calls - is lowered to Triton IR for a CUDA target by the grader's own Triton (no GPU needed). What the compiler
refuses is not a Triton kernel, whatever the interpreter would make of it: Python run through the interpreter
(``match``/``case`` class patterns, ``"%s" % tile``, a value's ``handle``) was how kernels reached the judge's
own Python on 2026-11-28, and the compiler refuses each of those constructs.

This file runs as a script (``python triton_frontend.py`` with the job as JSON on stdin; one JSON line out:
launch index -> why refused) with Triton *not* in interpreter mode: in an interpreting process Triton's own
library of @jit functions (``tl.sigmoid``, the combine functions of ``tl.max``) are the interpreter's, which the
compiler cannot lower. It imports nothing of kernellab (importing kernellab puts Triton in interpreter mode on
a machine without a GPU), only the standard library and Triton. ``kernel_source`` imports its helpers.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import linecache
import sys

# torch dtype names (as records hold them) -> Triton's type names in a kernel signature
TRITON_TYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64", "int8": "i8",
                "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
                "uint64": "u64", "bool": "i1", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}
# The target the front end lowers for: any CUDA target accepts the language itself; sm_90 keeps bf16, fp8e4nv and the
# usual tl.dot shapes legal (the front end checks the language, not one GPU's limits).
TARGET = ("cuda", 90, 32)


def one_function(source: str, parse=ast.parse) -> ast.FunctionDef:
    """The one function a recorded source holds, without its decorators (the judge applies triton.jit) and
    without statements that are only a constant (a docstring): the interpreter finds the function in the rebuilt
    text by its ``def`` line, and a docstring holding a line ``def ...`` (and the body it wanted run) was taken
    for the function (a red-team kernel, 2026-11-27: its checked body was one tl.program_id, its run body exec)."""
    tree = parse(source)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(tree.body) != 1 or len(fns) != 1:
        raise ValueError("the recorded source is not one function definition")
    fn = fns[0]
    fn.decorator_list = []
    fn.body = [n for n in fn.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))] or \
        [ast.Pass()]
    return fn


def constant_from_json(c):
    import triton.language as tl
    if isinstance(c, dict) and "tl_dtype" in c:
        return tl.dtype(c["tl_dtype"])  # recorded as str(dtype): "fp16", "bf16", "int32", ...
    return c


def jit_kernel(entries: dict, kid: str, made: dict):
    """``kid`` (and the kernels it calls) as JITFunctions from the recorded source, for the compiler: defined,
    never run. Module-level constants become constexprs, as the compiler requires of the globals a kernel reads."""
    import triton
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    if kid in made:
        return made[kid]
    entry = entries[kid]
    text = ast.unparse(ast.Module(body=[one_function(entry["source"])], type_ignores=[])) + "\n"
    filename = f"<kernellab-frontend-{kid}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)  # Triton reads the source
    # __name__: the compiler names a called function by its module
    namespace = {"triton": triton, "tl": tl, "__builtins__": __builtins__, "__name__": "kernellab_frontend"}
    for name, g in entry.get("globals", {}).items():
        if "module" in g:
            namespace[name] = importlib.import_module(g["module"])
        elif "const" in g:
            namespace[name] = tl.constexpr(constant_from_json(g["const"]))
    made[kid] = None
    for name, inner in entry.get("kernels", {}).items():
        namespace[name] = jit_kernel(entries, inner, made)
    exec(compile(text, filename, "exec"), namespace)  # a def statement: runs no body
    made[kid] = JITFunction(namespace[entry["name"]])
    return made[kid]


def _scalar_type(v) -> str | None:
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        return "i32" if -2**31 <= v < 2**31 else ("i64" if -2**63 <= v < 2**63 else "u64")
    if isinstance(v, float):
        return "fp32"
    return None


def launch_signature(fn, args: dict) -> tuple[dict, dict]:
    """(signature, constexprs) of one recorded launch of ``fn`` (a JITFunction): what Triton's JIT compiles it for,
    from the recorded arguments (``record.Recording.arg``'s form) and the parameters' defaults."""
    sig, consts = {}, {}
    for p in fn.params:
        name = p.name
        a = args.get(name)
        if a is None:  # not passed: its default, a constant (kernel_source.purity_problem)
            if p.default is inspect.Parameter.empty:
                raise ValueError(f"the launch passes no `{name}`")
            a = {"value": getattr(p.default, "value", p.default)}
        if "ptr" in a:
            if p.is_constexpr:
                raise ValueError(f"`{name}` is a tl.constexpr but the launch passes a tensor")
            ty = TRITON_TYPES.get(a.get("dtype") or "uint8")
            if ty is None:
                raise ValueError(f"`{name}` points to a {a.get('dtype')} tensor, which no kernel here takes")
            sig[name] = "*" + ty
            continue
        value = constant_from_json(a["const"]) if "const" in a else a.get("value")
        if p.is_constexpr or value is None or isinstance(value, str) or "const" in a:
            sig[name], consts[name] = "constexpr", value
            continue
        ty = _scalar_type(value)
        if ty is None:
            raise ValueError(f"`{name}` is passed a value no kernel argument can be")
        sig[name] = ty
    return sig, consts


def _message(exc: BaseException) -> str:
    """The compiler's own reason: the innermost error that says something (a call into a helper wraps it)."""
    said = ""
    while exc is not None:
        lines = [line for line in str(exc).strip().splitlines() if line.strip() and line.strip() != "^"]
        if lines:
            said = f"{type(exc).__name__}: {lines[-1].strip()}"
        exc = exc.__cause__
    return said


def refusal(entries: dict, kid: str, args: dict) -> str | None:
    """Why the compiler refuses kernel ``kid`` launched with ``args``, or None when it lowers it to Triton IR."""
    import warnings

    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend

    name = entries.get(kid, {}).get("name", "?")
    try:
        fn = jit_kernel(entries, kid, {})
        sig, consts = launch_signature(fn, args)
    except (ValueError, KeyError, SyntaxError, TypeError) as exc:
        return f"the kernel `{name}` could not be read back for Triton's compiler ({exc})"
    target = GPUTarget(*TARGET)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            backend = make_backend(target)
            options = backend.parse_options({})
            context = ir.context()
            ir.load_dialects(context)
            backend.load_dialects(context)
            src = ASTSource(fn, sig, consts)
            codegen, modules = backend.get_codegen_implementation(options), backend.get_module_map()
            if "target" in inspect.signature(src.make_ir).parameters:
                src.make_ir(target, options, codegen, modules, context)
            else:  # Triton before 3.5 took no target here
                src.make_ir(options, codegen, modules, context)
    except Exception as exc:  # noqa: BLE001 - whatever the compiler raises is its refusal
        return f"Triton's compiler refuses the kernel `{name}`: {_message(exc)}"[:400]
    return None


def main() -> int:
    job = json.loads(sys.stdin.read())
    entries, seen, out = job["entries"], {}, {}
    for i, launch in enumerate(job["launches"]):
        key = (launch["kernel"], json.dumps(launch["args"], sort_keys=True))
        if key not in seen:
            seen[key] = refusal(entries, launch["kernel"], launch["args"])
        if seen[key]:
            out[str(i)] = seen[key]
    sys.stdout.write("\n" + json.dumps(out) + "\n")
    sys.stdout.flush()
    import os
    os._exit(0)  # skip interpreter teardown: the compiler's bindings report leaked objects at exit


if __name__ == "__main__":
    sys.exit(main())
