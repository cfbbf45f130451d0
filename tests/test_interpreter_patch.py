"""compat.patch_interpreter_device_calls: inside a launch, a call of one @triton.jit function from another no longer
patches triton.language again in every program. The kernels' results must not change, the number of patches must
not grow with the grid, and after a launch triton.language must be as it was."""
import torch

import kernellab  # noqa: F401  (sets TRITON_INTERPRET and applies the patch on the CPU)
import triton
import triton.language as tl
from triton.runtime import interpreter as interp


@triton.jit
def _plus_row_sum(x):
    return x + tl.sum(x, 0)  # tl.sum is itself a jit function, seeing triton.language.core


@triton.jit
def _rows_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _plus_row_sum(tl.load(x_ptr + offs)))


def _run(programs):
    x = torch.arange(programs * 16, dtype=torch.float32)
    out = torch.empty_like(x)
    _rows_kernel[(programs,)](x, out, BLOCK=16)
    want = (x.view(programs, 16) + x.view(programs, 16).sum(1, keepdim=True)).reshape(-1)
    return out, want


def test_device_calls_patch_once_per_launch_and_results_stay_exact(monkeypatch):
    assert getattr(interp._patch_lang, "_kernellab", False), "the patch is applied on the CPU"
    calls = [0]
    real = interp._patch_builtin

    def counting(*a, **k):
        calls[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(interp, "_patch_builtin", counting)
    _run(2)  # the first launch that calls tl.sum makes it see triton.language too: one more module patched after it
    per_grid = {}
    for programs in (1, 16):
        calls[0] = 0
        out, want = _run(programs)
        assert torch.equal(out, want)
        per_grid[programs] = calls[0]
    # without the patch every program repeats the helper's and tl.sum's patches: 16 programs, 16 times as many
    assert per_grid[16] == per_grid[1] > 0, per_grid


def test_a_launch_leaves_triton_language_as_it_was():
    before = tl.dot
    _run(4)
    assert tl.dot is before and tl.core.is_builtin(tl.dot)


def test_overflow_checks_are_skipped_only_where_their_assertion_would_be_dropped():
    import dataclasses
    from types import SimpleNamespace

    from kernellab.compat import patch_interpreter_overflow_checks
    assert interp.interpreter_builder.options.sanitize_overflow is False  # applied on the CPU
    out, want = _run(3)  # integer offsets (pid * BLOCK + arange) still right
    assert torch.equal(out, want)
    stock = interp.InterpreterOptions()
    assert stock.sanitize_overflow and not stock.debug  # Triton's defaults: checks computed, assertion dropped
    quiet = SimpleNamespace(options=stock)
    assert patch_interpreter_overflow_checks(quiet) and quiet.options.sanitize_overflow is False
    debugging = SimpleNamespace(options=dataclasses.replace(stock, debug=True))
    assert not patch_interpreter_overflow_checks(debugging) and debugging.options.sanitize_overflow
