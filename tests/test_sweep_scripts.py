"""The GPU sweep scripts' CPU checks: each runs the kernels it would time in Triton's interpreter against a float64
reference, so a change to a lesson's solution that breaks a script is found here, not on the GPU machine.
scripts/matmul_sweep.py launches lesson 08's matmul_tma_kernel with other configurations; scripts/
ln_backward_variants.py loads lesson 07's reduce kernel and checks its backward variants; scripts/bwd_atomic_ab.py
runs lesson 05's backward with dQ added by atomics through lesson 05's correctness check; scripts/tma_attention_ab.py
runs lesson 08's attention variants (one tile, the early Q K^T, the halves with pointer loads) on three small shapes."""
import os
import subprocess
import sys

import pytest

from kernellab.paths import repo_root


@pytest.mark.parametrize("script", ["matmul_sweep.py", "ln_backward_variants.py", "bwd_atomic_ab.py",
                                    "tma_attention_ab.py"])
def test_a_sweep_scripts_cpu_check_passes(script):
    env = dict(os.environ, PYTHONPATH=str(repo_root() / "autograder"), TRITON_INTERPRET="1", KERNELLAB_FORCE_CPU="1")
    out = subprocess.run([sys.executable, str(repo_root() / "scripts" / script), "--cpu-check"], capture_output=True,
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
