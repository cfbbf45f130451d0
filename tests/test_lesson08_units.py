"""Lesson 08's parts that need no round trip: TMA's 16-byte rule as the lesson states it, what a GPU older than
Hopper does with the lesson (its kernels interpreted, its speed problems not graded), and the benchmark's refusal
without sm_90."""
import dataclasses

import pytest
import torch

from kernellab import _env
from kernellab import device as device_mod
from kernellab.lessons import lesson08 as L


def test_tma_legal_is_the_16_byte_rule():
    assert L.tma_legal(torch.empty(3000, 1504, dtype=torch.float16))
    assert not L.tma_legal(torch.empty(3000, 1500, dtype=torch.float16))  # 3000-byte rows
    assert not L.tma_legal(torch.empty(64, 64, dtype=torch.float16).t())  # last stride not 1
    assert L.tma_legal(torch.empty(16, 16, dtype=torch.float8_e4m3fn))
    assert not L.tma_legal(torch.empty(16, 24, dtype=torch.float8_e4m3fn))
    assert not L.tma_legal(torch.empty(8 * 64 + 1, dtype=torch.float16)[1:].view(8, 64))  # base off by 2 bytes


@pytest.mark.parametrize("want, have, too_old", [("9.0", (8, 0), True), ("9.0", (7, 5), True), ("9.0", (9, 0), False),
                                                 ("9.0", (10, 0), False), ("", (7, 5), False), ("junk", (7, 5), False)])
def test_a_gpu_older_than_the_lesson_needs_runs_it_in_the_interpreter(monkeypatch, want, have, too_old):
    monkeypatch.setenv("KERNELLAB_MIN_CAPABILITY", want)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: have)
    assert _env._too_old() is too_old


def _on(monkeypatch, capability):
    fake = dataclasses.replace(device_mod.DEVICE, on_gpu=True, capability=capability, name="a GPU")
    monkeypatch.setattr(device_mod, "DEVICE", fake)


def test_below_sm90_speed_is_not_graded_and_correctness_is_interpreted(monkeypatch):
    _on(monkeypatch, (8, 0))
    for p in (L.MATMUL_SPEED, L.MISALIGNED_SPEED, L.FP8_SPEED, L.ATTENTION_SPEED):
        why = p.not_gradable_here()
        assert why and "sm_90 or newer" in why and "sm_80" in why
    for p in (L.MATMUL, L.FP8, L.ATTENTION):
        assert p.interpreted and p.not_gradable_here() is None
    _on(monkeypatch, (9, 0))
    assert all(p.not_gradable_here() is None for p in L.PROBLEMS)
    assert not any(p.interpreted for p in (L.MATMUL, L.FP8, L.ATTENTION))


def test_other_lessons_problems_are_untouched_by_the_capability_gate(monkeypatch):
    from kernellab.lessons import lesson02
    _on(monkeypatch, (7, 5))
    assert lesson02.MATMUL_SPEED.not_gradable_here() is None and not lesson02.MATMUL.interpreted


def test_fp8_mistakes_name_the_scale_bugs():
    case = L.FP8.make_cases(torch.Generator().manual_seed(3), False)[2]
    right = L.fp8_reference(case)
    s = case.inputs[2].double() * case.inputs[3].double()
    twice, _ = L.FP8.mistakes[0]
    assert torch.allclose(twice(case), right * s)
    assert float(s) < 0.25  # the scales' product is far from 1, so a missing or doubled scale is far off
    assert "twice" in L.FP8.mistakes[0][1] and "without the scales" in L.FP8.mistakes[1][1]


def test_answers_follow_from_the_shape():
    got = {a.name: a.expected for a in L.TMA_ANSWERS.answers({})}
    assert got == {"ROW_BYTES": 3000, "PADDED_K": 1504, "PAD_BYTES": 18_000_000, "FP8_K_MULTIPLE": 16}


def test_the_benchmark_needs_sm90(capsys):
    from kernellab.lessons.l08_hopper import bench
    assert bench.bench_lesson08(quick=True) is None
    assert "needs sm_90" in capsys.readouterr().out


def test_guards_and_unchanged_inputs_compare_fp8_by_bytes():
    from kernellab.guarded import Guarded, same_elements
    g = Guarded((4, 4), torch.float8_e4m3fn, "cpu")
    assert g.guard_intact()
    g.base[g.span + 5] = 0.5
    assert not g.guard_intact() and g.first_guard_hit() == 5
    x = torch.tensor([1.0, float("nan"), 0.0])
    assert bool(same_elements(x, x.clone()).all())
    assert not bool(same_elements(x, torch.tensor([1.0, 0.0, 0.0])).all())  # NaN is not 0 (nan_to_num said it was)


def test_pad_cost_counts_what_the_answer_says():
    out = L.pad_cost()
    assert out["copy_bytes"] == {a.name: a.expected for a in L.TMA_ANSWERS.answers({})}["PAD_BYTES"]


def test_shape_bars_draw_one_bar_per_contender_and_shape():
    import matplotlib
    matplotlib.use("Agg")
    from kernellab.sweeps import plot_shape_bars
    rows = [{"shape": "3000x5000x1500", "yours_tflops": 343.0, "cuBLAS_tflops": 186.0},
            {"shape": "4096x4096x4096", "n": 4096, "yours_tflops": 712.0, "cuBLAS_tflops": 729.0}]
    ax = plot_shape_bars(rows, "test")
    assert len(ax.patches) == 4 and [t.get_text() for t in ax.get_xticklabels()] == [r["shape"] for r in rows]
