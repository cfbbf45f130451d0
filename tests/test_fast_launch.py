"""kernellab.launch.fast: the direct-launch path's bookkeeping, checked on the CPU with a stand-in for Triton's
compiled kernel (the real launch needs a GPU: autograder/benchmarks/fast_check.py checks it there against
Triton's own path), and timing.host_us. Runtime: about 1 s."""
import inspect

import pytest
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

import kernellab  # noqa: F401  (sets the interpreter up first)
from kernellab import launch, timing


def _k(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr, FLAG: tl.constexpr = 3):
    pass


class FakeCompiled:
    """What fast() needs of Triton's CompiledKernel: function, packed_metadata and a launcher ``run``."""
    function, packed_metadata = "fn", "meta"

    def __init__(self):
        self.launches = []

    def run(self, g0, g1, g2, stream, function, packed, launch_metadata, enter, exit_, *args):
        self.launches.append(((g0, g1, g2), stream, args))


class FakeTensor:
    pass


@pytest.fixture
def fk(monkeypatch):
    monkeypatch.setattr(launch, "_device", lambda: 0)
    monkeypatch.setattr(launch, "_stream", lambda d: 1234)
    jit = JITFunction(_k)
    f = launch.FastKernel(jit)
    f.interpreted = False
    compiled = FakeCompiled()
    slow = []

    def triton_path(grid, args, kwargs):  # Triton's own launch: counted, and it hands back the compiled kernel
        slow.append((grid, args, kwargs))
        f.stats["triton"] += 1
        return compiled
    monkeypatch.setattr(f, "_slow", triton_path)
    return f, compiled, slow


def test_pins_after_the_first_call_and_passes_every_parameter_in_order(fk):
    f, compiled, slow = fk
    f[(4,)](None, None, 32, 64, BLOCK=16)
    assert len(slow) == 1 and compiled.launches == []
    f[lambda meta: (meta["n"] // meta["BLOCK"], meta.get("FLAG"), meta.get("nothing", 5))](None, None, 32, 64, BLOCK=16)
    assert len(slow) == 1 and f.stats["fast"] == 1
    grid, stream, args = compiled.launches[0]
    assert grid == (2, 3, 5) and stream == 1234
    assert args == (None, None, 32, 64, 16, 3)  # positional, then the constexpr keyword, then the default


@pytest.mark.parametrize("changed", [
    (None, None, 33, 64),   # n no longer divisible by 16: another specialisation
    (None, None, 1, 64),    # equal to 1: Triton makes it a constant
    (None, None, 32, 2**33),  # 64-bit
])
def test_another_specialisation_goes_through_triton(fk, changed):
    f, compiled, slow = fk
    f[(1,)](None, None, 32, 64, BLOCK=16)
    f[(1,)](*changed, BLOCK=16)
    assert len(slow) == 2 and compiled.launches == []


def test_constexprs_passed_by_position_count_by_value(fk):
    f, compiled, slow = fk
    f[(1,)](None, None, 32, 64, 16)
    f[(1,)](None, None, 32, 64, 32)  # BLOCK differs: another kernel, even though both are multiples of 16
    assert len(slow) == 2
    f[(1,)](None, None, 32, 64, 32)
    assert len(slow) == 2 and compiled.launches[0][2] == (None, None, 32, 64, 32, 3)


def test_ints_key_by_value_and_bools_never_pass_for_ints(fk):
    f, compiled, slow = fk
    f[(1,)](None, None, 32, 64, BLOCK=16)
    f[(1,)](None, None, 48, 64, BLOCK=16)  # the same specialisation for Triton, another value: pinned anew
    assert len(slow) == 2
    f[(1,)](None, None, 48, 64, BLOCK=16)
    assert len(slow) == 2 and compiled.launches[-1][2] == (None, None, 48, 64, 16, 3)
    f[(1,)](None, None, 1, 64, BLOCK=16)
    f[(1,)](None, None, True, 64, BLOCK=16)  # True == 1 and hashes alike: it must not reuse the int's pin
    assert len(slow) == 4
    f[(1,)](None, None, 2.0, 64, BLOCK=16)  # floats are never specialised: one pin for every value
    f[(1,)](None, None, 3.0, 64, BLOCK=16)
    assert len(slow) == 5 and compiled.launches[-1][2][2] == 3.0


def test_the_pin_table_is_bounded(fk, monkeypatch):
    f, compiled, slow = fk
    monkeypatch.setattr(launch, "_MAX_PINS", 3)
    for n in range(10):
        f[(1,)](None, None, n + 2, 64, BLOCK=16)
    assert len(slow) == 10 and len(f.pins) <= 3
    f[(1,)](None, None, 11, 64, BLOCK=16)
    assert len(slow) == 10 and compiled.launches[-1][2][2] == 11


def test_keywords_count_by_value_and_unknown_types_are_never_pinned(fk):
    f, compiled, slow = fk
    f[(1,)](None, None, 32, 64, BLOCK=16)
    f[(1,)](None, None, 32, 64, BLOCK=32)
    assert len(slow) == 2
    for _ in range(2):
        f[(1,)](None, FakeTensor(), 32, 64, BLOCK=16)
    assert len(slow) == 4 and compiled.launches == []


def test_watched_or_hooked_calls_take_triton_s_path(fk, monkeypatch):
    f, compiled, slow = fk
    f[(1,)](None, None, 32, 64, BLOCK=16)
    monkeypatch.setattr(launch._watch, "current", lambda: object())
    f[(1,)](None, None, 32, 64, BLOCK=16)
    assert len(slow) == 2 and compiled.launches == []
    monkeypatch.setattr(launch._watch, "current", lambda: None)
    f[(1,)](None, None, 32, 64, BLOCK=16)
    assert len(slow) == 2 and len(compiled.launches) == 1


def test_a_replaced_jit_run_takes_triton_s_path(fk, monkeypatch):
    # e.g. grading/worker/compile_ahead.launches_as_requests: a launch must reach the replacement, never the GPU
    f, compiled, slow = fk
    f[(1,)](None, None, 32, 64, BLOCK=16)
    monkeypatch.setattr(JITFunction, "run", lambda self, *a, **k: None)
    f[(1,)](None, None, 32, 64, BLOCK=16)
    assert len(slow) == 2 and compiled.launches == []


def test_autotuned_kernel_follows_its_autotuner(monkeypatch):
    monkeypatch.setattr(launch, "_device", lambda: 0)
    monkeypatch.setattr(launch, "_stream", lambda d: 0)
    configs = [triton.Config({"BLOCK": 16}, num_warps=4), triton.Config({"BLOCK": 32}, num_warps=8)]
    tuner = triton.autotune(configs=configs, key=["n"])(JITFunction(_k))
    f = launch.FastKernel(tuner)
    f.interpreted = False
    compiled = FakeCompiled()
    slow = []

    def triton_path(grid, args, kwargs):  # what Autotuner.run leaves behind: its pick, cached under its key
        slow.append(args)
        tuner.best_config = configs[1]
        tuner.cache[(args[2],)] = configs[1]
        return compiled
    monkeypatch.setattr(f, "_slow", triton_path)
    grid = lambda meta: (meta["n"] // meta["BLOCK"],)  # noqa: E731
    f[grid](None, None, 64, 64)
    f[grid](None, None, 64, 64)
    assert len(slow) == 1 and compiled.launches[0][0] == (2, 1, 1)
    assert compiled.launches[0][2] == (None, None, 64, 64, 32, 3)  # the autotuner's BLOCK, FLAG's default
    f[grid](None, None, 128, 64)  # another value of the key argument: the autotuner decides
    assert len(slow) == 2
    tuner.cache.clear()  # e.g. tuning.compile_only forgetting its untimed picks
    f[grid](None, None, 64, 64)
    assert len(slow) == 3


def test_interpreter_launches_run_through_triton():
    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)
    import torch
    x = torch.zeros(8)
    f = kernellab.fast(add_one)
    for _ in range(2):
        f[(1,)](x, 8, BLOCK=8)
    assert x.tolist() == [2.0] * 8 and f.stats == {"fast": 0, "triton": 2}
    assert kernellab.fast(add_one) is f


def test_host_us_measures_a_call_s_host_time():
    import time
    t = timing.host_us(lambda: time.sleep(0.001), n=5, rounds=3)
    assert 900 < t < 20000
    assert timing.host_us(lambda: None, n=50, rounds=3) < 50
