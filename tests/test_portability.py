"""Graded code runs on every GPU from a T4 (sm_75) up: no bf16, FP8 or TMA in graded cells, and every
kernel that uses tl.dot is autotuned over configurations that include ones fitting 64 KB of shared
memory (the first one, which the interpreter uses, among them). The exception is a lesson about newer
hardware (lesson 08, Hopper): every one of its speed problems names the GPU it needs, and below it the
lesson's kernels run in the interpreter (test_mode.py)."""
import inspect
import re

import pytest
from triton.runtime.autotuner import Autotuner
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernellab.lessons import LESSONS, problems_of
from kernellab.notebook_cells import load_solution
from kernellab.notebook_source import read_notebook, sources_for
from kernellab.paths import repo_root
from kernellab.tuning import T4_SHARED_BYTES, shared_bytes

# "tma" as a word: "softmax" contains the letters too
NOT_ON_A_T4 = re.compile(r"bfloat16|float8|fp8|make_tensor_descriptor|_experimental_descriptor|\btma\b", re.I)


def _needs_newer_gpu(lesson) -> bool:
    return any(p.min_capability for p in problems_of(lesson).values())


PORTABLE = [lesson for lesson in LESSONS if not _needs_newer_gpu(lesson)]


def test_a_lesson_about_newer_hardware_says_so_on_every_speed_problem():
    newer = [lesson for lesson in LESSONS if _needs_newer_gpu(lesson)]
    assert newer == ["08_hopper"]
    for lesson in newer:
        for p in problems_of(lesson).values():
            if p.kind == "speed":
                assert tuple(p.min_capability) == (9, 0), p.id


def _graded_names(lesson):
    return tuple(sorted({n for p in problems_of(lesson).values() if p.kind in ("correctness", "speed")
                         for n in p.names}))


@pytest.mark.parametrize("lesson", PORTABLE)
def test_graded_cells_use_nothing_a_t4_lacks(lesson):
    nb = read_notebook(repo_root() / "solutions" / lesson / f"{lesson}.ipynb")
    sources, missing = sources_for(nb, _graded_names(lesson))
    assert not missing
    for src in sources:
        code = "\n".join(line.split("#")[0] for line in src.splitlines())  # comments may mention them
        assert not NOT_ON_A_T4.search(code), (lesson, NOT_ON_A_T4.search(code).group(0))


@pytest.mark.parametrize("lesson", PORTABLE)
def test_dot_kernels_are_autotuned_over_configs_that_fit_a_t4(lesson):
    ns = load_solution(lesson, _graded_names(lesson))
    tuned = {id(v.fn): v for v in ns.values() if isinstance(v, Autotuner)}
    kernels = [v for v in ns.values() if isinstance(v, (JITFunction, InterpretedFunction))]
    kernels += [t.fn for t in tuned.values()]
    for k in kernels:
        if "tl.dot" not in inspect.getsource(k.fn):
            continue
        if id(k) not in tuned:  # a helper gets its block sizes from the autotuned kernels that call it
            callers = [t for t in tuned.values() if f"{k.fn.__name__}(" in inspect.getsource(t.fn.fn)]
            assert callers, f"{lesson}: {k.fn.__name__} uses tl.dot without autotuning over T4-sized configs"
            continue
        configs = tuned[id(k)].configs
        fits = [c for c in configs if shared_bytes(c) <= T4_SHARED_BYTES]
        assert fits, f"{lesson}: no configuration of {k.fn.__name__} fits 64 KB"
        assert shared_bytes(configs[0]) <= T4_SHARED_BYTES, "the first (interpreter) config must fit a T4"
