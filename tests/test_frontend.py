"""The judge interprets a recorded kernel only after Triton's own compiler accepts it (kernel_source.frontend_problem):
each way Python reached the judge through an interpreted kernel (2026-11-28, written outside the project) is refused
by the compiler's front end, and honest kernels - helpers, module-level constexprs, defaults, dtypes - pass."""
import pytest

from kernellab.kernel_source import frontend_problems
from kernellab.triton_frontend import jit_kernel, launch_signature


def frontend_problem(entries, kid, args):
    """The compiler's answer for one launch, asked as the judge asks (a process of its own)."""
    return frontend_problems(entries, [{"kernel": kid, "args": list(args.items())}]).get((kid, 0))

ADD = '''def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
'''
ARGS = {"x_ptr": {"ptr": [0, 0], "dtype": "float32"}, "y_ptr": {"ptr": [1, 0], "dtype": "float32"},
        "out_ptr": {"ptr": [2, 0], "dtype": "float32"}, "n": {"value": 4097}, "BLOCK": {"value": 1024}}
TL = {"tl": {"module": "triton.language"}}


def _entries(source, globs=None, kernels=None, extra=None):
    name = source.split("(")[0].split()[-1]
    out = {"k": {"kind": "source", "name": name, "source": source, "globals": {**TL, **(globs or {})},
                 "kernels": kernels or {}}}
    out.update(extra or {})
    return out


def test_an_honest_kernel_passes_and_its_signature_is_what_the_jit_would_compile():
    entries = _entries(ADD)
    assert frontend_problem(entries, "k", ARGS) is None
    sig, consts = launch_signature(jit_kernel(entries, "k", {}), ARGS)
    assert sig == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    assert consts == {"BLOCK": 1024}


def test_helpers_module_constants_defaults_and_dtypes_pass():
    helper = '''def silu(v):
    return v * tl.sigmoid(v)
'''
    kern = '''def gate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr = 256, OUT: tl.constexpr = tl.float16):
    offs = tl.program_id(0) * SPAN + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    tl.store(out_ptr + offs, silu(x).to(OUT), mask=offs < n)
'''
    entries = _entries(kern, globs={"SPAN": {"const": 256}}, kernels={"silu": "h"},
                       extra={"h": {"kind": "source", "name": "silu", "source": helper, "globals": dict(TL)}})
    args = {"x_ptr": {"ptr": [0, 0], "dtype": "float16"}, "out_ptr": {"ptr": [1, 0], "dtype": "float16"},
            "n": {"value": 3}, "OUT": {"const": {"tl_dtype": "fp16"}}}
    assert frontend_problem(entries, "k", args) is None


@pytest.mark.parametrize("body, says", [
    # structural pattern matching names attributes as strings, which no syntax check reads
    ("    x = tl.load(x_ptr + tl.arange(0, BLOCK))\n    match x:\n        case tl.tensor(handle=h):\n"
     "            tl.store(out_ptr + tl.arange(0, BLOCK), x)\n", "Match"),
    # a tile turned into text, then into Python numbers
    ("    x = tl.load(x_ptr + tl.arange(0, BLOCK))\n    s = '%s' % x\n"
     "    tl.store(out_ptr + tl.arange(0, BLOCK), x + float(s.split()[0]))\n", ""),
    # the interpreter's numpy array behind a value
    ("    x = tl.load(x_ptr + tl.arange(0, BLOCK))\n    a = x.handle.data\n"
     "    tl.store(out_ptr + tl.arange(0, BLOCK), x)\n", ""),
    # a value's class, a step towards its module
    ("    x = tl.load(x_ptr + tl.arange(0, BLOCK))\n    c = type(x)\n    tl.store(out_ptr + tl.arange(0, BLOCK), x)\n", ""),
])
def test_each_escape_into_python_is_refused_by_the_compiler(body, says):
    src = "def k2(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n" + body
    why = frontend_problem(_entries(src), "k", ARGS)
    assert why is not None and "Triton's compiler refuses the kernel `k2`" in why
    assert says in why


def test_a_launch_that_passes_a_tensor_for_a_constexpr_is_refused():
    args = dict(ARGS, BLOCK={"ptr": [0, 0], "dtype": "float32"})
    assert "constexpr" in frontend_problem(_entries(ADD), "k", args)
