"""The grade of record computes correctness references on the job's GPU (harness.reference_on_gpu): the same
values come back on the CPU, and a reference that cannot run there is computed on the CPU instead."""
from __future__ import annotations

from types import SimpleNamespace as NS

import torch

from kernellab.grading.judge import harness
from kernellab.problems.base import Case


def _case():
    g = torch.Generator().manual_seed(3)
    return Case("n=5", [torch.randn(5, generator=g, dtype=torch.float16), torch.randn(5, generator=g), 2.0])


def test_the_reference_moves_to_the_device_and_comes_back_on_the_cpu():
    seen = []

    def reference(case):
        x, y, k = case.inputs
        seen.append(x.device.type)
        return (x.double() * k + y.double()), (x.double() - y.double())
    problem = NS(reference=reference, interpreted=False)
    # the CPU stands in for the GPU here: what comes back is what the reference computed, on the CPU
    ref = harness.reference_on_gpu(problem, device="cpu", on_gpu=True)
    out = ref(_case())
    want = reference(_case())
    assert seen[0] == "cpu" and isinstance(out, tuple) and len(out) == 2
    assert all(o.device.type == "cpu" and torch.equal(o, w) for o, w in zip(out, want))


def test_a_reference_that_cannot_run_there_is_computed_on_the_cpu():
    calls = []

    def reference(case):
        x = case.inputs[1]
        calls.append(x.device.type)
        return x.double() + torch.arange(x.numel(), dtype=torch.float64)  # made on the CPU: fails beside meta
    problem = NS(reference=reference, interpreted=False)
    out = harness.reference_on_gpu(problem, device="meta", on_gpu=True)(_case())
    assert calls == ["meta", "cpu"]
    assert torch.equal(out, reference(_case()))


def test_without_a_gpu_or_for_interpreted_problems_it_is_the_problems_own():
    def reference(case):
        return case.inputs[1]
    assert harness.reference_on_gpu(NS(reference=reference, interpreted=False), on_gpu=False) is reference
    assert harness.reference_on_gpu(NS(reference=reference, interpreted=True), on_gpu=True) is reference
