"""Lessons 04 and 05 without nbgrader: the tile schedule the widget draws, the memory bound, answers with
several tensors, and the autograd.Function check's refusals."""
import types

import pytest

from kernellab.grading.instructor.submissions import known_wrong, read
from kernellab.learner import _correctness
from kernellab.lessons import lesson04 as L4
from kernellab.lessons import lesson05 as L5
from kernellab.notebook_cells import load_solution
from kernellab.paths import repo_root
from kernellab.problems.base import Case, CorrectnessProblem, pattern_hint

SRC4 = read(repo_root() / "solutions" / L4.LESSON / f"{L4.LESSON}.ipynb")


def test_program_visits_follow_the_kernels_loop_split():
    kinds = [p["kind"] for p in L4.program_visits(1000, 128, 64, True, 3)]  # rows 384..511
    assert kinds[:6] == ["full"] * 6 and kinds[6:8] == ["masked"] * 2 and set(kinds[8:]) == {"skipped"}
    kinds = [p["kind"] for p in L4.program_visits(1000, 128, 64, False, 0)]
    assert kinds == ["full"] * 15 + ["masked"]  # 960..999: the partial block
    last = L4.program_visits(1000, 128, 64, True, 7)  # rows 896..999
    assert [p["kind"] for p in last][-2:] == ["masked", "masked"] and last[-1]["keys"] == (960, 999)


def test_an_n_by_n_scratch_loses_the_memory_points_with_the_numbers():
    wrong = known_wrong(L4.LESSON, SRC4)["scores_scratch"]
    fa = load_solution(L4.LESSON, ("flash_attention",), wrong)["flash_attention"]
    out = _correctness(L4.FLASH_MEMORY, fa)
    assert out.fraction == 0 and "MB besides its outputs" in out.message and "never materialises" in out.message
    good = load_solution(L4.LESSON, ("flash_attention",))["flash_attention"]
    assert _correctness(L4.FLASH_MEMORY, good).passed


def test_returning_only_the_output_says_two_tensors_are_expected():
    good = load_solution(L4.LESSON, ("flash_attention",))["flash_attention"]
    out = _correctness(L4.FLASH, lambda q, k, v, causal: good(q, k, v, causal)[0])
    assert out.fraction == 0 and "expected a tuple of 2 tensors (output, lse)" in out.message


def test_the_function_check_wants_an_autograd_function():
    out = _correctness(L5.FUNCTION, lambda q, k, v, causal: None)
    assert out.fraction == 0 and "torch.autograd.Function" in out.message


def test_no_tag_is_blamed_when_every_case_is_wrong():
    p = CorrectnessProblem("x", 1, ("f",), "f", hints={"tail": "the tail"})
    cases = [Case("a", [], tags=("tail",)), Case("b", [], tags=("tail",))]
    assert pattern_hint(p, cases, {"a", "b"}) == ""
    assert pattern_hint(p, cases + [Case("c", [])], {"a", "b"}) == "the tail "


@pytest.mark.parametrize("answers, right", [((4 * 32 * 16384 ** 2 * 2, 4 * 32 * 16384 * 4, 4 * 4 * 32 * 16384 ** 2 * 128,
                                               128), 4), ((1, 2, 3, 4), 0)])
def test_memory_answers(answers, right):
    from kernellab.problems.base import judge_answers
    out = judge_answers(L4.MEMORY_ANSWERS, dict(zip(L4.MEMORY_ANSWERS.names, answers)), {})
    assert out.details["right"] == right


def test_both_training_runs_start_from_the_same_weights_and_data():
    # with SDPA on both sides the two loss curves must be identical, step for step
    curves = L5.train_tiny(types.SimpleNamespace(apply=L5.attention_sdpa), steps=3, plot=False)
    assert len(curves["yours"]) == 3 and curves["yours"] == curves["SDPA"]


def test_attention_benchmark_runs_end_to_end_on_the_cpu(monkeypatch, tmp_path):
    """The GPU benchmark's plumbing with the solution kernels in the interpreter on small shapes: SDPA's
    backends, the GPU timer and the allocator's peak replaced (fixed times, so the ratios are known)."""
    import kernellab.lessons.l04_flash_attention.bench as BA
    import kernellab.lessons.attention as A
    import kernellab.timing as T

    monkeypatch.setattr(T, "interleaved", lambda fns, rounds: {k: 0.5 if k == "solution" else 1.0 for k in fns})
    monkeypatch.setattr(BA, "_backends", lambda: dict.fromkeys(("flash", "cudnn", "SDPA default"), A.attention_sdpa))
    monkeypatch.setattr(A, "peak_extra_bytes", lambda fn, *args: None if fn is A.attention_naive else 1e6)
    monkeypatch.setattr(BA, "SHAPES", [(16, 100, False), (32, 70, True)])
    monkeypatch.setattr(BA, "MEMORY_NS", (64,))
    monkeypatch.setattr(BA, "B", 1)
    monkeypatch.setattr(BA, "H", 2)
    res = BA.bench_attention()
    for r in res["shapes"]:
        assert r["fwd_vs_flash"] == r["bwd_vs_cudnn"] == 2.0
        assert r["fwd_rel_error"] < 1e-3 and r["lse_rel_error"] < 1e-5 and r["bwd_rel_error"] < 1e-3
    assert res["memory"][0]["naive_mb"] is None and res["memory"][0]["solution_mb"] == 1.0
    BA.write_attention(res, tmp_path)
    assert "| 32 | 70 | yes |" in (tmp_path / "lesson04.md").read_text() and "OOM" in (tmp_path / "lesson04.md").read_text()
    assert "| 16 | 100 | no |" in (tmp_path / "lesson05.md").read_text()
    assert (tmp_path / "lesson04_tflops.png").exists() and (tmp_path / "lesson04_memory.png").exists()


def test_a_missing_key_mask_is_named_however_many_causal_tail_cases_pass():
    """Causal masking hides keys >= N, so causal cases with a tail pass with the bug: the hint must not depend
    on how many of them the secret seed drew (this flaked in CI with three of them)."""
    from kernellab.lessons.attention import HINTS, tags_for
    p = CorrectnessProblem("x", 1, ("f",), "f", hints=HINTS)
    shapes = [(1, False), (200, False), (129, False), (100, True), (300, True), (77, True), (256, False), (64, True)]
    cases = [Case(f"N={n} causal={c}", [], tags=tags_for(n, c, "bhnd")) for n, c in shapes]
    wrong = {c.label for c, (n, causal) in zip(cases, shapes) if n % 64 and not causal}
    assert "It is wrong only when N is not a multiple of the block and attention is not causal" in pattern_hint(
        p, cases, wrong)


@pytest.mark.parametrize("n_ctx,block_m,block_n", [(1000, 64, 128), (256, 64, 32), (77, 16, 16), (130, 32, 64)])
@pytest.mark.parametrize("causal", [True, False])
def test_backward_schedules_cover_every_visible_tile_once_per_kernel(n_ctx, block_m, block_n, causal):
    # The lesson 05 widget's claim: the dK/dV kernel (down the key columns) and the dQ kernel (along the query
    # rows) each visit every visible tile of P exactly once, with a mask exactly where some lane needs one.
    from kernellab.lessons.l04_flash_attention.problems import program_visits
    from kernellab.lessons.l05_flash_attention_backward.problems import dkdv_visits
    n_qb, n_kb = -(-n_ctx // block_m), -(-n_ctx // block_n)

    def truth(i, j):  # by brute force over the padded tile's lanes
        rows, keys = range(i * block_m, (i + 1) * block_m), range(j * block_n, (j + 1) * block_n)
        ok = [r < n_ctx and c < n_ctx and (c <= r or not causal) for r in rows for c in keys]
        return "skipped" if not any(ok) else "full" if all(ok) else "masked"

    want = {(i, j): truth(i, j) for i in range(n_qb) for j in range(n_kb)}
    by_dkdv = {(t["block"], j): t["kind"] for j in range(n_kb) for t in dkdv_visits(n_ctx, block_m, block_n, causal, j)}
    assert by_dkdv == want
    dq = [(i, t["block"], t["kind"]) for i in range(n_qb) for t in program_visits(n_ctx, block_m, block_n, causal, i)]
    assert {(i, j) for i, j, k in dq if k != "skipped"} == {t for t, k in want.items() if k != "skipped"}


def test_backward_tiles_widget_draws_without_a_browser():
    import matplotlib
    matplotlib.use("Agg")
    from kernellab.lessons.l05_flash_attention_backward.problems import backward_tiles
    ui = backward_tiles(n_ctx=300, block_m=64, block_n=32)
    assert ui is not None and len(ui.children) == 4  # two rows of controls, the picture, a line for errors
    key_block, picture, note = ui.children[0].children[0], ui.children[2], ui.children[3]
    before = bytes(picture.value)  # the widget keeps a memoryview
    assert before.startswith(b"\x89PNG")
    key_block.value = 3  # moving a slider draws a new picture, and no error
    assert bytes(picture.value).startswith(b"\x89PNG") and bytes(picture.value) != before and note.value == ""


def test_an_lse_near_zero_is_judged_at_the_scale_of_the_scores():
    # One key (N = 1): the lse is the one score, which can be near 0; a correct kernel's fp32 rounding (about 1e-7
    # of scores near 1) then read 2.4e-5 relative to that value, over fp32's 1e-5. Measured against a scale of at
    # least 1 it passes; an lse that is wrong by more than rounding still fails.
    import torch

    from kernellab.compare import compare
    from kernellab.problems.base import compare_outputs
    ref = torch.tensor([[[0.004]]], dtype=torch.float64)
    rounded = (ref + 1e-7).float()
    assert not compare(rounded, ref).ok  # the tensor's own scale: 2.5e-5 > 1e-5
    assert compare(rounded, ref, floor=1.0).ok
    assert not compare((ref * 1.4427).float(), ref, floor=1.0).ok  # log2 for ln: wrong, and still caught
    problem = L4.FLASH
    out = torch.zeros(1, 1, 1, 16)
    ok = compare_outputs(problem, (out.half(), rounded), (out.double(), ref), "N=1")
    assert ok.ok and problem.norm_floor == {"lse": 1.0}
    bad = compare_outputs(problem, (out.half(), (ref + 1e-3).float()), (out.double(), ref), "N=1")
    assert not bad.ok and bad.message.startswith("lse:")
