"""Lesson 02's pieces on the CPU: the program-order check and its hints, the matmul hints from
failure patterns, shared-memory accounting for a T4, the order widget's arithmetic, guard sizes."""
import pytest
import torch

from kernellab.grading.instructor import submissions as S
from kernellab.guarded import GUARD, Guarded, guard_elements
from kernellab.lessons import lesson02 as L
from kernellab.lessons.l02_tiled_matmul.bench import _load
from kernellab.lessons.l02_tiled_matmul.widgets import wave_footprint
from kernellab.paths import repo_root
from kernellab.problems.base import CallResult, judge_correctness, judge_function, run_function, seeded_generator
from kernellab.report import CheckFailed
from kernellab.tuning import T4_SHARED_BYTES, shared_bytes

SRC = S.read(repo_root() / "solutions" / L.LESSON / f"{L.LESSON}.ipynb")


def _judge_tiles(fn):
    cases = L.TILE_OF.make_cases(seeded_generator(3))
    return judge_function(L.TILE_OF, cases, run_function(fn, L.TILE_OF, cases))


def test_reference_order_visits_every_tile_once_and_groups_rows():
    tiles = [L.grouped_tile(p, 13, 7, 4) for p in range(13 * 7)]
    assert sorted(tiles) == [(m, n) for m in range(13) for n in range(7)]
    assert tiles[:5] == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1)]
    assert tiles[-1] == (12, 6)  # the last group has a single row


@pytest.mark.parametrize("fn, words", [
    (lambda pid, m, n, g: (pid // n, pid % n), "row-major order"),
    (lambda pid, m, n, g: (0, 0), "exactly once"),
    (lambda pid, m, n, g: ((pid // (g * n)) * g + (pid % (g * n)) % g, (pid % (g * n)) // g), "last group"),
    (lambda pid, m, n, g: [float(pid), 0.0], "tuple of Python ints"),
    (lambda pid, m, n: (0, 0), "4 positional arguments"),
])
def test_tile_order_mistakes_are_named(fn, words):
    out = _judge_tiles(fn)
    assert out.fraction == 0 and words in out.message, out.message


def test_reference_order_passes_its_own_check():
    assert _judge_tiles(L.grouped_tile).fraction == 1


def test_grouped_wave_reads_fewer_strips_than_row_major():
    _, rows_g, cols_g = wave_footprint(L.grouped_tile, 16, 16, 4, 0, 24)
    _, rows_r, cols_r = wave_footprint(L.row_major_tile, 16, 16, 4, 0, 24)
    assert len(rows_g) + len(cols_g) < len(rows_r) + len(cols_r)


def test_configs_include_t4_sized_ones_and_the_interpreter_pick_fits():
    configs = _load()["CONFIGS"]
    assert shared_bytes(configs[0]) <= T4_SHARED_BYTES
    assert sum(shared_bytes(c) <= T4_SHARED_BYTES for c in configs) >= 3


def test_two_dimensional_guard_covers_a_block_of_rows_past_the_end():
    g = Guarded((40, 1000), torch.float16, "cpu")
    assert g.base.numel() - g.span >= 256 * 1000
    assert Guarded((10,), torch.float32, "cpu").base.numel() - 10 == GUARD
    t = Guarded((40, 1000), torch.float16, "cpu", strides=(1, 40))  # transposed: a tile past the last column
    assert t.base.numel() - t.span >= 256 * 40
    # (B, H, N, D): 256 rows past the last row, and outer programs past the last batch up to the view's own size
    # (256 batch strides would be 256 times the batch)
    shape, strides = (2, 32, 4096, 64), (32 * 4096 * 64, 4096 * 64, 64, 1)
    assert guard_elements(shape, strides) == 2 * 32 * 4096 * 64  # its span: two batch strides past the end
    assert guard_elements((1, 4, 64, 16), (4 * 64 * 16, 64 * 16, 16, 1)) == GUARD  # small: the 1-D minimum
    assert guard_elements((3, 4096, 512), (8 * 512, 512, 1)) == 256 * 8 * 512 + 256  # 256 batch strides fit
    assert guard_elements((40, 1000), (1000, 1)) == 256 * 1000 + 256


@pytest.mark.parametrize("bug, words", [("wrong_strides", "transposed"), ("fp16_accumulation", "long-K")])
def test_learner_check_names_the_bug(bug, words):
    wrong = S.known_wrong(L.LESSON, SRC)[bug]
    matmul = _load(wrong)["matmul"]
    with pytest.raises(CheckFailed) as info:
        L.check_matmul(matmul)
    assert words in str(info.value), str(info.value)


def test_k_tail_hint_when_only_the_k_mask_is_missing():
    text = S.solution_texts(SRC)["matmul_code"]
    no_k_mask = (text.replace(", mask=rk[None, :] < k_left, other=0.0", "")
                 .replace(", mask=rk[:, None] < k_left, other=0.0", ""))
    matmul = _load({"matmul_code": no_k_mask})["matmul"]
    with pytest.raises(CheckFailed) as info:
        L.check_matmul(matmul)
    assert "K is not a multiple of the block" in str(info.value), str(info.value)


def test_out_of_shared_memory_says_which_knobs_to_turn():
    from triton.runtime.errors import OutOfResources

    from kernellab.invoke import describe_exception
    msg = describe_exception(OutOfResources(196608, 65536, "shared memory"), "`matmul` on M=128")
    assert "196608" in msg and "num_stages" in msg and "64 KB" in msg, msg


def _matmul_with(old, new):
    text = S.solution_texts(SRC)["matmul_code"]
    assert old in text, old
    return _load({"matmul_code": text.replace(old, new)})["matmul"]


# What TF32 tensor cores do to fp32 tiles, written out so that the interpreter shows it: keep the top
# 10 mantissa bits (the hardware ignores the other 13).
_TF32_DOT = ("a = (a.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)\n"
             "        b = (b.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)\n"
             "        acc = tl.dot(a, b, acc)")


@pytest.mark.parametrize("old, new, ok, words", [
    (None, None, True, "Correct on all 2 cases"),
    ("acc = tl.dot(a, b, acc)", _TF32_DOT, False, 'input_precision="ieee"'),
    ("acc = tl.dot(a, b, acc)", "acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc)", False, "cut to 16 bits"),
    ("c = a.new_empty((M, N))", "c = a.new_empty((M, N), dtype=torch.float16)", False, "float16"),
    ("acc = tl.dot(a, b, acc)", "acc = tl.dot(a, b, acc) * 1.001", False, "Wrong result"),
])
def test_fp32_check_names_tf32_and_other_fp32_mistakes(capsys, old, new, ok, words):
    matmul = _load()["matmul"] if old is None else _matmul_with(old, new)
    assert L.check_matmul_fp32(matmul) is ok  # said, never raised: Run All goes on
    said = capsys.readouterr().out
    assert words in said, said
    assert ("rounded to TF32" in said) == (new == _TF32_DOT), said


@pytest.mark.parametrize("nearest", [True, False])
def test_tf32_products_rounded_or_truncated_get_the_tf32_hint(nearest):
    # Tensor cores may round each input to TF32 or drop its low bits: both are the same known mistake.
    cases = L.MATMUL_FP32.make_cases(seeded_generator(5), False)
    tf32 = [CallResult(c.label, (L._rounded(c.inputs[0], 10, nearest) @ L._rounded(c.inputs[1], 10, nearest)))
            for c in cases]
    out = judge_correctness(L.MATMUL_FP32, cases, tf32 + tf32[:1])
    assert out.fraction == 0 and 'input_precision="ieee"' in out.message, out.message
    exact = [CallResult(c.label, c.inputs[0] @ c.inputs[1]) for c in cases]
    assert judge_correctness(L.MATMUL_FP32, cases, exact + exact[:1]).fraction == 1


def test_the_solution_pads_operands_whose_strides_allow_no_wide_loads():
    """Section 4's item 8 in the interpreter: with the size threshold lowered, misaligned operands (odd K or N, a
    view of a wider matrix) go through zero-padded copies and the product, with and without bias + GELU, stays
    right (an (M, N) view of the padded product where N was padded); operands that item 7 already aligns are not
    copied."""
    from kernellab.notebook_cells import load_solution
    ns = load_solution(L.LESSON, ("matmul", "matmul_bias_gelu"), tag="padding")
    ns["PAD_ABOVE"] = 0
    padded = []
    inner = ns["_launch_padded"]
    ns["_launch_padded"] = lambda *a: (padded.append(tuple(a[0].shape)), inner(*a))[1]
    g = torch.Generator().manual_seed(2)
    for m, n, k in ((5, 7, 9), (33, 17, 13)):
        a = torch.randn(m, k + 3, generator=g).half()[:, :k]  # a view: row stride k + 3
        b = torch.randn(k, n, generator=g).half()
        c = ns["matmul"](a, b)
        ref = a.double() @ b.double()
        assert c.shape == (m, n) and c.stride() == (n + -n % 8, 1) and ((c.double() - ref).norm() / ref.norm()) < 2e-3
    assert padded == [(5, 9), (33, 13)]
    bias = torch.randn(7, generator=g).half()
    a, b = torch.randn(5, 9, generator=g).half(), torch.randn(9, 7, generator=g).half()
    y = ns["matmul_bias_gelu"](a, b, bias)
    ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double(), approximate="tanh")
    assert ((y.double() - ref).norm() / ref.norm()) < 2e-3
    ns["matmul"](torch.randn(8, 16, generator=g).half(), torch.randn(16, 8, generator=g).half())  # ALIGN 8: as is
    assert len(padded) == 3


@pytest.mark.parametrize("problem", [L.MATMUL, L.EPILOGUE], ids=lambda p: p.id)
def test_the_padded_path_passes_the_grade_of_record(problem):
    # The grade of record refuses PyTorch arithmetic in graded code, copies included (torch.nn.functional.pad is
    # aten::constant_pad_nd): with every shape padded, the solution must still earn every point of both problems.
    # (On a GPU its random shapes reach M N K >= 2^32 with odd strides in about one grading in five.)
    from kernellab.grading.judge import harness
    nb = S.read(repo_root() / "solutions" / L.LESSON / f"{L.LESSON}.ipynb")
    cell = next(c for c in nb.cells if "PAD_ABOVE = 2 ** 32" in c.source)
    cell.source = cell.source.replace("PAD_ABOVE = 2 ** 32", "PAD_ABOVE = 0")
    outcome, _ = harness.grade_problem(problem, nb, seed=5, lesson=L.LESSON)
    assert outcome.fraction == 1.0, outcome.message
