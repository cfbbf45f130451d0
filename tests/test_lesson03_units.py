"""Lesson 03's pieces on the CPU: the byte counter behind exercise 1, the read counter behind the online
softmax check, the hints each known mistake gets, the online-softmax widget's arithmetic, the side-stream
cross-check on launch-bound kernels."""
import math

import pytest
import torch

from kernellab import learner
from kernellab.grading.instructor import submissions as S
from kernellab.lessons import lesson03 as L
from kernellab.lessons.l03_fused_softmax_layernorm.widgets import online_softmax_trace
from kernellab.notebook_cells import load_solution
from kernellab.paths import repo_root
from kernellab.reads import count_reads
from kernellab.report import CheckFailed
from kernellab.timing import escaped
from kernellab.traffic import traffic

SRC = S.read(repo_root() / "solutions" / L.LESSON / f"{L.LESSON}.ipynb")
WRONG = S.known_wrong(L.LESSON, SRC)
NAMES = ("softmax", "online_softmax", "add_layernorm")


@pytest.fixture(scope="module")
def solution():
    return load_solution(L.LESSON, NAMES)


def test_eager_softmax_moves_eight_tensors_and_a_fused_one_two():
    r, c = 64, 1000
    x = torch.empty(r, c, dtype=torch.float16, device="meta")
    rows = traffic(L.softmax_eager, x)
    assert [row["op"] for row in rows] == ["torch.amax", "torch.sub", "torch.exp", "torch.sum", "torch.div"]
    n = r * c
    assert sum(row["read"] + row["written"] for row in rows) == 2 * (8 * n + 4 * r)
    fused = traffic(lambda t: torch.softmax(t, dim=-1), x)
    assert len(fused) == 1 and fused[0]["read"] + fused[0]["written"] == 2 * 2 * n


def test_reads_are_counted_per_element_and_three_passes_are_refused(solution):
    x = torch.randn(3, 9001)
    with count_reads([x]) as reads:
        solution["online_softmax"](x)
    assert reads.available and reads.elements == [2 * x.numel()]
    three = load_solution(L.LESSON, ("online_softmax",), WRONG["three_pass_online"])["online_softmax"]
    with count_reads([x]) as reads:
        three(x)
    assert reads.elements == [3 * x.numel()]
    with pytest.raises(CheckFailed, match=r"3\.00 per element, where at most 2\.00"):
        learner.check(L.ONLINE_READS, three)
    learner.check(L.ONLINE, three)  # the three-pass version is right: only its reads cost it


@pytest.mark.parametrize("mistake, problem, words", [
    ("no_max_subtraction", L.SOFTMAX, "Subtract the row's max"),
    ("zero_padding", L.SOFTMAX, "not a power of two"),
    ("row_stride_from_cols", L.SOFTMAX, "x.stride(0)"),
    ("unmasked_tail", L.SOFTMAX, "wrote past the end"),
    ("unbiased_variance", L.LAYERNORM, "unbiased variance"),
    ("one_pass_variance", L.LAYERNORM, "E[h^2] - E[h]^2"),
    # y stored with x's row stride overruns the output only on the strided view: the stride hint, not "mask"
    ("output_with_x_stride", L.LAYERNORM, "wrote past the end of its output (at least 1 element(s) beyond it). "
                                          "It is wrong only when x is a view"),
])
def test_each_known_mistake_gets_its_hint(mistake, problem, words):
    fn = load_solution(L.LESSON, NAMES, WRONG[mistake])[problem.names[0]]
    with pytest.raises(CheckFailed) as err:
        learner.check(problem, fn)
    assert words in str(err.value), str(err.value)


def test_solution_passes_every_correctness_check_with_fresh_inputs(solution):
    for problem in (L.SOFTMAX, L.ONLINE, L.ONLINE_READS, L.LAYERNORM):
        assert learner.check(problem, solution[problem.names[0]]) is None


def test_speed_references_agree_with_the_baselines():
    gen = torch.Generator().manual_seed(0)
    for problem, shape in ((L.SOFTMAX_SPEED, (8, 300)), (L.LAYERNORM_SPEED, (8, 300))):
        inputs = (L._randn_rows(shape)(gen, "cpu") if problem is L.SOFTMAX_SPEED else L._randn_ln(shape)(gen, "cpu"))
        idx = torch.randint(inputs[0].numel(), (50,), generator=gen)
        want = problem.baseline(*[t.float() if isinstance(t, torch.Tensor) else t for t in inputs]).reshape(-1)[idx]
        assert torch.allclose(problem.reference_at(inputs, idx).float(), want, rtol=1e-4, atol=1e-5)


def test_online_trace_ends_at_the_two_pass_max_and_sum():
    row = [0.5, -1.0, 3.0, 2.0, 7.5, -3.0, 1.0]
    steps = online_softmax_trace(row, block=3)
    m = max(row)
    assert steps[0]["scale"] == 0.0  # nothing summed yet: the first rescale vanishes
    assert steps[1]["scale"] < 1.0  # the max moved from 3.0 to 7.5
    assert steps[-1]["m"] == m
    assert math.isclose(steps[-1]["l"], sum(math.exp(v - m) for v in row), rel_tol=1e-12)


def test_launch_bound_kernels_are_not_flagged_but_hidden_work_is():
    assert not escaped(wall_ms=0.127, gpu_ms=0.048, issue_ms=0.12)  # the H100 false flag: host-bound
    assert escaped(wall_ms=0.6, gpu_ms=0.05, issue_ms=0.04)  # work the events did not see
    assert not escaped(wall_ms=None, gpu_ms=0.05, issue_ms=None)


def test_benchmark_runs_end_to_end_through_the_shared_timers(monkeypatch, tmp_path):
    """The GPU benchmark's plumbing on the CPU: real solution kernels in the interpreter on small shapes,
    torch.compile and the GPU timer replaced (the timer by fixed times, so the ratios are known)."""
    import kernellab.lessons.l03_fused_softmax_layernorm.bench as B
    import kernellab.timing as T

    times = {"solution": 0.5, "online": 0.5}
    monkeypatch.setattr(T, "interleaved", lambda fns, rounds: {k: times.get(k, 1.0) for k in fns})
    monkeypatch.setattr(L, "_compiled", lambda fn: fn)
    monkeypatch.setattr(B, "COLS", (16, 300))
    monkeypatch.setattr(B, "ELEMENTS", 16 * 300)
    monkeypatch.setattr(B, "ONLINE_COLS", (5000,))
    monkeypatch.setattr(B, "LN_COLS", (64, 100))
    monkeypatch.setattr(B, "LN_ELEMENTS", 64 * 100)
    res = B.bench_lesson03()
    assert [(r["dtype"], r["cols"]) for r in res["softmax"]] == [
        ("float16", 16), ("float16", 300), ("float32", 16), ("float32", 300)]
    for r in res["softmax"] + res["layernorm"]:
        assert r["vs_eager"] == r["vs_compile"] == 2.0 and r["rel_error"] < 1e-3
    assert all(r["vs_torch"] == 2.0 for r in res["softmax"])
    assert res["online"][0]["online_gbps"] == 2 * res["online"][0]["torch.softmax_gbps"]
    B.write_lesson03(res, tmp_path)
    table = (tmp_path / "lesson03.md").read_text()
    assert "| float32 | 300 |" in table and "**no**" in table  # 2x the eager chain misses the 5x target
    assert (tmp_path / "lesson03_softmax.png").exists() and (tmp_path / "lesson03_roofline.png").exists()
