"""The stock ``triton.autotune`` (several configurations, what the Triton tutorials use) runs in the CPU
interpreter with its first configuration instead of failing with "0 active drivers" while benchmarking."""
import torch
import triton
import triton.language as tl

from kernellab.grading import corpus as C
from kernellab.invoke import describe_exception


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((64, 4), (128, 4), (256, 8))],
                 key=["n"])
@triton.jit
def _tuned_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def test_stock_triton_autotune_runs_its_first_config_in_the_interpreter(capfd):
    for n in (1000, 333):  # a second key: still no benchmark
        x, y = torch.randn(n), torch.randn(n)
        out = torch.empty_like(x)
        _tuned_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
        torch.testing.assert_close(out, x + y)
        assert _tuned_add.best_config.kwargs == {"BLOCK": 64}
    assert len(_tuned_add.configs) == 3  # the kernel's own configurations are left as they were
    assert capfd.readouterr().err == ""


def test_zero_active_drivers_is_explained():
    msg = describe_exception(RuntimeError("0 active drivers ([]). There should only be one."), "`add` on n=1000")
    assert "triton.autotune benchmarks its configurations on a GPU" in msg and "kl.autotune" in msg


def test_stock_triton_autotune_is_graded_full():
    [r] = C.run([C.by_name("stock_autotuned_add")], progress=False)
    assert r["score"] == r["points"], r["why"]


_ROTATE_SCRIPT = r'''
import os, json
import torch, triton, triton.language as tl
import kernellab  # noqa: F401  (the interpreter; the patches)
from triton.runtime.autotuner import Autotuner
from kernellab.tuning import rotate_configs

def drop_256(configs, named_args, **kw):
    return [c for c in configs if c.kwargs["BLOCK"] != 256]

@triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (64, 128, 256, 512)], key=["n"],
                 prune_configs_by={"early_config_prune": drop_256})
@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

timed = []
real_do_bench = triton.testing.do_bench
triton.testing.do_bench = lambda *a, **k: timed.append(1) or real_do_bench(*a, **k)
assert rotate_configs() and rotate_configs()  # a second call changes nothing
Autotuner.run = Autotuner.run._original  # past the interpreter's first-configuration patch: as on a GPU
picks = []
for n in (100, 200, 300, 400, 100):  # the last repeats a key: its pick is the cached one
    x, y = torch.randn(n), torch.randn(n)
    out = torch.empty_like(x)
    add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    assert torch.equal(out, x + y)
    picks.append(add.best_config.kwargs["BLOCK"])
print(json.dumps({"picks": picks, "timed": len(timed), "cache_results": add.cache_results}))
'''


def test_correctness_workers_rotate_configurations_instead_of_timing_them(tmp_path):
    """The correctness worker's autotuners time nothing: each new key takes the next configuration the
    kernel's pruning keeps (64, 128, 512, then 64 again; 256 is pruned), a repeated key keeps its pick."""
    import json
    import os
    import subprocess
    import sys
    script = tmp_path / "rotate.py"
    script.write_text(_ROTATE_SCRIPT)
    env = {**os.environ, "KERNELLAB_FORCE_CPU": "1"}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"picks": [64, 128, 512, 64, 64], "timed": 0, "cache_results": False}, out


def _counting_kernel(ran: list):
    """An autotuned add whose configurations say when they run (a config pre_hook runs before each launch)."""
    configs = [triton.Config({"BLOCK": b}, pre_hook=lambda nargs, b=b: ran.append(b)) for b in (64, 128, 256)]
    return triton.autotune(configs=configs, key=["n"])(_tuned_add.fn)


def test_compile_only_runs_each_configuration_once_times_none_and_forgets_its_pick():
    from triton.runtime.autotuner import Autotuner

    from kernellab.tuning import compile_only
    ran, timed = [], []
    tuner = _counting_kernel(ran)
    tuner.do_bench = lambda call, quantiles=None: timed.append(call) or [0.5, 0.5, 0.5]  # a GPU's timer, here
    tuner.cache_results = True  # the learner asked for Triton's disk cache: nothing untimed may reach it
    run = Autotuner.run._original  # past the interpreter's first-config patch: the autotuner as on a GPU
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.empty_like(x)
    with compile_only() as picked:
        run(tuner, x, y, out, 1000, grid=lambda meta: (triton.cdiv(1000, meta["BLOCK"]),), warmup=False)
        assert tuner.cache_results is False
    torch.testing.assert_close(out, x + y)
    assert ran == [64, 128, 256, 64] and timed == []  # each compiled and run once, then the call itself
    assert picked == [tuner] and tuner.cache == {} and tuner.cache_results is True
    ran.clear()
    run(tuner, x, y, out, 1000, grid=lambda meta: (triton.cdiv(1000, meta["BLOCK"]),), warmup=False)
    assert len(timed) == 3 and len(tuner.cache) == 1  # outside the block: timed as written


def test_a_speed_worker_asks_for_its_gpu_alone_only_when_an_autotuner_had_a_choice(tmp_path):
    import threading
    import time

    from triton.runtime.autotuner import Autotuner

    from kernellab.grading.worker.child import _tune_alone
    ran = []
    tuner = _counting_kernel(ran)
    tuner.do_bench = lambda call, quantiles=None: call() or [0.5, 0.5, 0.5]
    x, y = torch.randn(300), torch.randn(300)
    out = torch.empty_like(x)

    def call():
        grid = lambda meta: (triton.cdiv(300, meta["BLOCK"]),)  # noqa: E731
        Autotuner.run._original(tuner, x, y, out, 300, grid=grid, warmup=False)

    asked = []
    worker = threading.Thread(target=lambda: asked.append(_tune_alone(call, tmp_path)))
    worker.start()
    time.sleep(0.5)
    assert (tmp_path / "phase").read_text() == "alone" and worker.is_alive()  # waits for the parent's "go"
    (tmp_path / "go").write_text("go")
    t0 = time.monotonic()
    while (tmp_path / "phase").read_text() != "shared" and time.monotonic() - t0 < 10:
        time.sleep(0.01)
    # tuned (the compile budget), it gives the GPU back and waits for the parent's word that it shares it again
    time.sleep(0.2)
    assert (tmp_path / "phase").read_text() == "shared" and worker.is_alive()
    assert tuner.cache  # tuned on the second call (the quiet one), and kept
    (tmp_path / "go-shared").write_text("go")
    worker.join(10)
    assert asked == [True] and (tmp_path / "phase").read_text() == "compile"  # then on, as before it asked
    plain, quiet = [], tmp_path / "plain"
    quiet.mkdir()
    assert _tune_alone(lambda: plain.append(1), quiet) is False and plain == [1]
    assert not (quiet / "phase").exists()  # never asked


def test_compile_only_is_no_tampering_once_allowed_before_the_snapshot():
    """The speed worker patches the autotuner before its integrity snapshot; tuning afterwards changes nothing the
    snapshot watches (a patch after it would read as the learner's tampering and score 0)."""
    from kernellab.grading.worker import integrity
    from kernellab.tuning import allow_compile_only, compile_only
    assert allow_compile_only()
    snapshot = integrity.Snapshot()
    with compile_only():
        pass
    assert snapshot.changed() == []
    from triton.runtime.autotuner import Autotuner
    patched = Autotuner._bench
    Autotuner._bench = lambda self, *a, **k: patched(self, *a, **k)  # what a patch after the snapshot looks like
    try:
        assert snapshot.changed() == ["Autotuner._bench"]
    finally:
        Autotuner._bench = patched


def test_in_rounds_times_configurations_back_and_forth_so_a_drift_does_not_pick():
    """A GPU that slows as it heats (here 5 % more per timing) makes Triton's one-after-another timing pick the
    first configuration; in rounds, back and forth, the truly fastest (the last, 5 % faster) is picked, each
    configuration timed once per round. An autotuner given its own do_bench keeps timing one after another."""
    from triton.runtime.autotuner import Autotuner

    from kernellab import tuning
    assert tuning.allow_compile_only()
    ran, timings = [], []
    base = {64: 1.0, 128: 1.0, 256: 0.95}

    def heating(kernel_call, quantiles=None):
        kernel_call()  # the configuration's pre_hook says which one it is
        t = base[ran[-1]] * (1 + 0.05 * len(timings))
        timings.append(ran[-1])
        return [t, t, t] if quantiles else t
    run = Autotuner.run._original  # past the interpreter's first-config patch: the autotuner as on a GPU
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.empty_like(x)

    def tune(tuner):
        tuner.cache.clear()
        timings.clear()
        run(tuner, x, y, out, 1000, grid=lambda meta: (triton.cdiv(1000, meta["BLOCK"]),), warmup=False)
        torch.testing.assert_close(out, x + y)
        return tuner.best_config.kwargs["BLOCK"]

    tuner = _counting_kernel(ran)
    tuner.do_bench = heating  # Triton's own benchmarker, as it would read on that GPU
    assert tune(tuner) == 64 and timings == [64, 128, 256]
    del tuner.do_bench
    real = tuning._round_bench
    tuning._round_bench = heating
    try:
        with tuning.in_rounds(4):
            assert tune(tuner) == 256
        assert timings == [64, 128, 256, 256, 128, 64] * 2
        assert "do_bench" not in tuner.__dict__  # the autotuner's own benchmarker back
        own = triton.autotune(configs=tuner.configs, key=["n"], do_bench=heating)(_tuned_add.fn)
        with tuning.in_rounds(4):
            assert tune(own) == 64 and timings == [64, 128, 256]
    finally:
        tuning._round_bench = real
