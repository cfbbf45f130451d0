"""Lesson 10's checks, in the notebook's process: the references and the tie rule, the tile schedule's bound,
integer outputs compared exactly, and broken kernels that each check must fail with the hint that names them."""
import pytest
import torch

from kernellab.compare import compare
from kernellab.lessons import lesson10 as L
from kernellab.notebook_cells import load_solution
from kernellab.report import CheckFailed

LESSON = "10_mixture_of_experts"


def test_reference_route_breaks_ties_to_the_lower_expert_and_keeps_slot_order():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 5.0, 5.0]])
    weights, experts, counts, offsets, dest = L.reference_route(logits, 2)
    assert experts.tolist() == [[1, 2], [0, 1], [2, 3]]
    assert torch.allclose(weights, torch.full((3, 2), 0.5, dtype=torch.float64))
    assert counts.tolist() == [1, 2, 2, 1] and offsets.tolist() == [0, 1, 3, 5, 6]
    # slots in order: (t0: 1, 2), (t1: 0, 1), (t2: 2, 3) -> expert 1 gets slots 0 then 3, expert 2 slots 1 then 4
    assert dest.tolist() == [1, 3, 0, 2, 4, 5]


def test_integer_outputs_must_match_exactly():
    ref = torch.arange(100000, dtype=torch.float64)
    off_by_one = torch.arange(100000, dtype=torch.int32)
    off_by_one[77777] += 1
    assert compare(torch.arange(100000, dtype=torch.int32), ref).ok
    verdict = compare(off_by_one, ref)
    assert not verdict.ok and "index 77777" in verdict.message


def test_the_launch_bound_covers_every_schedule():
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        e = int(torch.randint(1, 70, (1,), generator=gen))
        sizes = [int(s) for s in torch.randint(0, 90, (e,), generator=gen) * (torch.rand(e, generator=gen) > 0.4)]
        block = int(2 ** torch.randint(3, 8, (1,), generator=gen))
        tiles = L.tile_table(sizes, block)
        assert len(tiles) <= -(-sum(sizes) // block) + e
        assert sum(min(block, hi - lo) for _, lo, hi in tiles) == sum(sizes)  # every row once


def test_moe_reference_equals_the_per_token_formula():
    case = L.moe_case(torch.Generator().manual_seed(3), 6, 8, 4, 5, 2)
    x, wgu, wd, experts, weights = case.inputs
    want = torch.zeros(6, 8, dtype=torch.float64)
    for t in range(6):
        for j in range(2):
            e = int(experts[t, j])
            gu = x[t].double() @ wgu[e].double()
            want[t] += weights[t, j].double() * ((torch.nn.functional.silu(gu[:4]) * gu[4:]) @ wd[e].double())
    assert torch.allclose(L.moe_reference(*case.inputs), want)


@pytest.fixture(scope="module")
def broken():
    """The solution with one mistake in each of two cells (loaded once)."""
    return load_solution(LESSON, ("route", "grouped_matmul"), edit=lambda s: s.replace(
        "tl.min(tl.where(x == best[:, None], cols[None, :], BLOCK_E), 1)",
        "tl.max(tl.where(x == best[:, None], cols[None, :], -1), 1)").replace(
        "tiles = (hi - lo + BLOCK_M - 1) // BLOCK_M", "tiles = (hi - lo) // BLOCK_M"))


def test_ties_to_the_higher_index_fail_with_the_tie_rule(broken):
    with pytest.raises(CheckFailed, match="lower expert index"):
        L.check_route(broken["route"])


def test_partial_row_tiles_never_computed_fail_as_unwritten_rows(broken):
    with pytest.raises(CheckFailed, match="NaN"):
        L.check_grouped_matmul(broken["grouped_matmul"])


def test_the_schedule_picture_counts_working_and_idle_tiles(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernellab.widgets import tile_schedule
    monkeypatch.setenv("KERNELLAB_STATIC_WIDGETS", "1")
    plt.close("all")
    tile_schedule((5, 0, 17, 1, 40, 0, 9), 8)  # tiles 1 + 3 + 1 + 5 + 2 = 12 of cdiv(72, 8) + 7 = 16 launched
    assert plt.gcf().axes[0].get_title().startswith("12 row tiles do work; 4 of the 16 launched")
    plt.close("all")


def test_the_persistent_kernel_matches_float64_falls_back_and_a_broken_one_is_caught(capsys):
    # Section 8's ungraded kernel in the interpreter: its TMA descriptors (w's 3-d one ends each expert at K),
    # the exact tile count, and the fallback for inputs no descriptor takes (the cases name which is which).
    ns = load_solution(LESSON, ("grouped_matmul", "grouped_matmul_persistent"))
    fallbacks = []
    real = ns["grouped_matmul"]

    def counted(*a):
        fallbacks.append(a[0].stride())
        return real(*a)
    ns["grouped_matmul"] = counted  # the wrapper finds grouped_matmul in its cell's namespace
    assert L.compare_persistent(real, ns["grouped_matmul_persistent"]) == []
    assert "4 cases match float64" in capsys.readouterr().out
    assert len(fallbacks) == 2  # K = 36 (a 72-byte row stride) and the column-major x
    old = "b = w_desc.load([e, k0, pid_n * BLOCK_N])"
    wrong_expert = load_solution(LESSON, ("grouped_matmul", "grouped_matmul_persistent"), tag="persistent_broken",
                                 edit=lambda s: s.replace(old, "b = w_desc.load([(e + 1) % E, k0, pid_n * BLOCK_N])"))
    with pytest.raises(AssertionError, match="relative error"):
        L.compare_persistent(real, wrong_expert["grouped_matmul_persistent"])
