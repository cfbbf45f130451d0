"""The GPU sweep scripts' CPU checks: each runs the kernels it would time in Triton's interpreter against a float64
reference, so a change to a lesson's solution that breaks a script is found here, not on the GPU machine.
autograder/benchmarks/matmul_sweep.py launches lesson 08's matmul_tma_kernel with other configurations; scripts/
ln_backward_variants.py loads lesson 07's reduce kernel and checks its backward variants; scripts/bwd_atomic_ab.py
runs lesson 05's backward with dQ added by atomics through lesson 05's correctness check; scripts/tma_attention_ab.py
runs lesson 08's attention variants (one tile, the early Q K^T, the halves with pointer loads) on three small shapes;
scripts/exp_offload_ab.py runs lessons 04 and 08's solutions with part or all of the softmax's exponentials moved to
the FMA pipe (and checks that polynomial on its own). autograder/benchmarks/fast_check.py (issue 56's A/B) builds
its before and after variants of lessons 02 and 07, runs them against float64 and each other, and compiles lesson
02's kernel for sm_90 to count its loads (about 30 s on 2 busy cores)."""
import os
import subprocess
import sys

import pytest

from kernellab.paths import repo_root


@pytest.mark.parametrize("script", ["matmul_sweep.py", "fast_check.py"])
def test_a_sweep_scripts_cpu_check_passes(script):
    env = dict(os.environ, PYTHONPATH=str(repo_root() / "autograder"), TRITON_INTERPRET="1", KERNELLAB_FORCE_CPU="1")
    out = subprocess.run([sys.executable, str(repo_root() / "autograder" / "benchmarks" / script), "--cpu-check"], capture_output=True,
                         text=True, timeout=300, env=env, cwd=repo_root())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "CPU CHECK PASSED" in out.stdout
    assert "FAILED" not in out.stdout


def test_candidates_are_timed_only_when_they_run_and_agree_with_the_reference():
    # What the GPU A/B scripts (tma_attention_ab.py, gluon_attention/bench.py) time: a candidate that raises, or whose
    # output is off, is reported with the reason and left out; the rest keep their callables, in order.
    import torch

    from kernellab.sweeps import checked_candidates

    def oom():
        raise RuntimeError("out of resource: shared memory\nmore detail")

    def silent():
        raise ValueError()

    ref = torch.ones(4)
    cands = {"good": lambda: ref + 1e-4, "off": lambda: ref * 2, "oom": oom, "silent": silent, "also": lambda: ref}
    keep, errs, fails = checked_candidates(cands, lambda out: (out - ref).abs().max().item(), "the reference's")
    assert list(keep) == ["good", "also"] and keep["good"] is cands["good"]
    assert set(errs) == {"good", "off", "also"} and errs["off"] == 1.0
    assert fails == {"off": "output differs from the reference's: 1.00e+00",
                     "oom": "RuntimeError: out of resource: shared memory", "silent": "ValueError: "}


def test_an_ab_row_times_the_fixed_and_the_agreeing_candidates_against_the_baseline(monkeypatch):
    # The per-shape A/B both attention scripts build their JSON from, with do_bench replaced by known times
    import torch
    import triton.testing

    from kernellab.sweeps import ab_row

    times = {"base": 2.0, "mine": 1.0, "good": 4.0}
    calls = []

    def fake_do_bench(fn, warmup, rep, return_mode):
        assert (warmup, rep, return_mode) == (10, 60, "median")
        name = fn()[1]
        calls.append(name)
        return times[name]

    monkeypatch.setattr(triton.testing, "do_bench", fake_do_bench)
    ref = torch.ones(3)
    row = ab_row({"base": lambda: (ref, "base"), "mine": lambda: (ref, "mine")},
                 {"good": lambda: (ref, "good"), "off": lambda: (ref * 3, "off")},
                 lambda out: (out[0] - ref).abs().max().item(), "the reference's", flops=4e9, rounds=3, baseline="base")
    assert row["do_bench_ms"] == times and row["rounds_ms"]["good"] == [4.0] * 3
    assert row["vs_base"] == {"mine": 2.0, "good": 0.5}
    assert row["tflops"] == {"base": 2.0, "mine": 4.0, "good": 1.0}
    assert set(row["errors"]) == {"good", "off"} and row["failed"] == {"off": "output differs from the reference's: 2.00e+00"}
    assert "off" not in calls and calls.count("good") == 3
