"""Learner checks: they pass honest kernels and name the bug in broken ones, in one paragraph."""
import pytest
import torch
import triton

import kernels as K
from kernellab.lessons import lesson01 as L
from kernellab.report import CheckFailed


def failure(fn, check=L.check_add):
    with pytest.raises(CheckFailed) as e:
        check(fn)
    return str(e.value)


@pytest.mark.parametrize("block,warps", [(128, 1), (1024, 4), (4096, 8), (16384, 8)])
def test_honest_block_sizes_pass(block, warps, capsys):
    assert L.check_add(K.launcher(K.add_masked, block, warps=warps)) is None
    assert "✓" in capsys.readouterr().out


def test_unmasked_tail_writes_past_the_end():
    msg = failure(K.launcher(K.add_unmasked))
    assert "wrote past the end" in msg and "mask" in msg


def test_masked_store_with_unmasked_loads_is_still_correct():
    # Reads past the end land in the guard region, the store is masked: output right, no stray writes.
    assert L.check_add(K.launcher(K.add_store_mask_only)) is None


def test_grid_too_small_names_the_tail():
    msg = failure(K.launcher(K.add_masked, 1024, grid=lambda n, b: (max(n // b, 1),)))
    assert "never written" in msg and "from index" in msg
    assert "cdiv" in msg


def test_unwritten_output():
    msg = failure(K.launcher(K.add_no_store))
    assert "never written" in msg


def test_nan_output():
    msg = failure(K.launcher(K.add_nan))
    assert "NaN" in msg


def test_wrong_only_in_last_block_hints_the_mask():
    msg = failure(K.launcher(K.add_tail_wrong, 1024))
    assert "on (of" in msg and "masked" in msg


def test_wrong_arithmetic():
    msg = failure(K.launcher(K.sub_kernel))
    # x - y is right wherever y rounds to 0; the message then points at the first wrong element
    assert "wrong" in msg and ("expected" in msg or "are wrong; everything before" in msg)


def test_torch_op_instead_of_kernel():
    msg = failure(lambda x, y: x + y)
    assert "PyTorch" in msg and "torch.add" in msg


def test_no_triton_launch():
    msg = failure(lambda x, y: torch.empty_like(x))
    assert "launched no Triton kernel" in msg


def test_wrong_signature():
    msg = failure(lambda x: x)
    assert "2 positional arguments" in msg and "add(x, y)" in msg


def test_not_a_function_and_missing():
    assert "not a function" in failure(42)
    assert "no function" in failure(None)


def test_stub_not_implemented():
    def add(x, y):
        raise NotImplementedError("write your code here")
    assert "not written yet" in failure(add)


def test_exception_inside_kernel_is_one_paragraph():
    msg = failure(K.launcher(K.not_compiling))
    assert "Traceback" not in msg and "undefined_name" in msg


def test_wrong_dtype_and_shape():
    def to_fp32(x, y):
        out = torch.empty(x.shape, dtype=torch.float64)
        K.add_masked[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
    assert "expected torch.float" in failure(to_fp32)

    def too_long(x, y):
        out = torch.empty(x.numel() + 1, dtype=x.dtype)
        K.add_masked[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
    assert "shape" in failure(too_long)


def test_returning_an_input_and_writing_into_inputs():
    def into_x(x, y):
        K.add_masked[(triton.cdiv(x.numel(), 1024),)](x, y, x, x.numel(), BLOCK=1024)
        return x
    assert "returned one of its inputs" in failure(into_x)

    def clobber(x, y):
        out = torch.empty_like(x)
        K.add_masked[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        K.add_masked[(triton.cdiv(x.numel(), 1024),)](x, y, y, x.numel(), BLOCK=1024)
        return out
    assert "changed its input 1" in failure(clobber)


def test_cached_buffer_is_refused():
    kept = {}
    honest = K.launcher(K.add_masked)

    def cached(x, y):  # launches every time, but hands back the first result for a shape
        out = honest(x, y)
        return kept.setdefault((x.numel(), x.dtype), out)
    assert "not allocated during the call" in failure(cached)


def test_fused_checks_and_speed_cells_without_gpu(capsys):
    ns = __import__("kernellab.notebook_cells", fromlist=["load_solution"]).load_solution(
        "01_roofline_vector_add", ("add", "silu_gate"))
    assert L.check_silu_gate(ns["silu_gate"]) is None
    assert L.check_silu_gate_speed(ns["silu_gate"]) is None  # CPU: explains, awards nothing
    assert "only measured on a GPU" in capsys.readouterr().out
    assert "not timed" in failure(K.launcher(K.sub_kernel), L.check_add_bandwidth)


def test_answers_partial_and_wrong(capsys):
    assert L.check_answers_add(3 * 2 * 2**24, 2**24, 1 / 6, "memory") is None
    # Partial credit is said, and nothing is returned: a returned number showed as a stray Out[ ] under the cell.
    assert L.check_answers_add(3 * 2 * 2**24, 2**24, 1 / 6, "compute") is None
    assert "(1.5 of 2 points)" in capsys.readouterr().out
    from kernellab.learner import VERDICTS
    assert VERDICTS["answers_add"]["fraction"] == pytest.approx(0.75)
    with pytest.raises(CheckFailed):
        L.check_answers_matmul(None, None, None, None)
    with pytest.raises(CheckFailed):
        L.check_answers_matmul(float("nan"), True, "1365", 7)


def test_thresholds_sit_ten_times_from_honest_and_wrong_variants():
    """fp16 threshold 1e-2: the sloppiest honest kernel must be >= 10x under, a wrong one >= 10x over."""
    from kernellab.compare import REL_TOL
    from kernellab.problems.base import judge_correctness, run_correctness, seeded_generator
    prob = L.FUSED
    cases = [c for c in prob.make_cases(seeded_generator(7), False) if c.inputs[0].dtype == torch.float16]

    def worst(kernel):
        res = run_correctness(K.launcher(kernel), prob, cases, "cpu", stop_on_error=False)
        from kernellab.compare import rel_error
        return max(rel_error(r.output, prob.reference(c)) for c, r in zip(cases, res))
    assert worst(K.silu_gate_in_input_dtype) * 10 <= REL_TOL[torch.float16]
    assert worst(K.silu_gate_dropped_term) >= 10 * REL_TOL[torch.float16]
    assert judge_correctness(prob, cases, run_correctness(K.launcher(K.silu_gate_in_input_dtype), prob, cases,
                                                          "cpu")).passed


def test_failed_static_assert_names_its_line_and_message():
    import inspect
    line = next(i for i, s in enumerate(inspect.getsource(K.add_block_of_64.fn).splitlines())
                if "static_assert" in s) + K.add_block_of_64.fn.__code__.co_firstlineno
    assert L.check_add(K.launcher(K.add_block_of_64, 128)) is None
    msg = failure(K.launcher(K.add_block_of_64, 32))
    assert "tl.static_assert failed in your kernel at line " + str(line) in msg, msg
    assert "`tl.static_assert(BLOCK % 64 == 0, \"BLOCK must be a multiple of 64\")`" in msg, msg
    assert msg.rstrip(".").endswith("BLOCK must be a multiple of 64"), msg


def test_the_device_relative_error_is_rel_errors_measure():
    import torch

    from kernellab.compare import rel_error, rel_error_on_device
    g = torch.Generator().manual_seed(3)
    ref = torch.randn(1000, generator=g)
    out = ref + 1e-3 * torch.randn(1000, generator=g)
    assert abs(rel_error_on_device(out, ref) - rel_error(out, ref)) < 1e-6
    assert abs(rel_error_on_device(out, torch.zeros(1000)) - out.norm().item()) < 1e-4  # a zero reference: the norm


def test_interleaved_alternates_the_contenders_with_any_timer():
    from kernellab.timing import interleaved
    order = []
    got = interleaved({"a": "A", "b": "B"}, 3, timer=lambda f: order.append(f) or {"A": 1.0, "B": 2.0}[f])
    assert order == ["A", "B", "B", "A", "A", "B"]
    assert got["a"] == 1.0 and got["b"] == 2.0 and got["a_all"] == [1.0, 1.0, 1.0]


def test_silu_gate_where_it_cancels_is_judged_against_a_floor_not_its_own_tiny_value():
    """x * sigmoid(x) * y + x near 0 (y = -1 / sigmoid(x)): an honest float32 result is off by float32's rounding of
    |x|, a large part of the tiny output; against the floor it passes, and a wrong kernel still fails."""
    from kernellab.compare import compare
    from kernellab.lessons.l01_roofline_vector_add.problems import FUSED_FLOOR, silu_gate_eager, silu_gate_reference
    x = torch.tensor([2.0, -3.0, 0.7])
    y = (-1.0 / torch.sigmoid(x.double())).float()
    ref = silu_gate_reference(x, y)
    honest = silu_gate_eager(x, y)
    assert ref.abs().max() < 1e-5  # it cancels
    assert not compare(honest, ref).ok  # judged against its own value, the honest result fails
    assert compare(honest, ref, floor=FUSED_FLOOR["output"]).ok
    assert not compare(x * torch.sigmoid(x) * y, ref, floor=FUSED_FLOOR["output"]).ok  # "+ x" forgotten
