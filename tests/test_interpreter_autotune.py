"""The stock ``triton.autotune`` (several configurations, what the Triton tutorials use) runs in the CPU
interpreter with its first configuration instead of failing with "0 active drivers" while benchmarking."""
import torch
import triton
import triton.language as tl

from kernellab.grading import corpus as C
from kernellab.invoke import describe_exception


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((64, 4), (128, 4), (256, 8))],
                 key=["n"])
@triton.jit
def _tuned_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def test_stock_triton_autotune_runs_its_first_config_in_the_interpreter(capfd):
    for n in (1000, 333):  # a second key: still no benchmark
        x, y = torch.randn(n), torch.randn(n)
        out = torch.empty_like(x)
        _tuned_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
        torch.testing.assert_close(out, x + y)
        assert _tuned_add.best_config.kwargs == {"BLOCK": 64}
    assert len(_tuned_add.configs) == 3  # the kernel's own configurations are left as they were
    assert capfd.readouterr().err == ""


def test_zero_active_drivers_is_explained():
    msg = describe_exception(RuntimeError("0 active drivers ([]). There should only be one."), "`add` on n=1000")
    assert "triton.autotune benchmarks its configurations on a GPU" in msg and "kl.autotune" in msg


def test_stock_triton_autotune_is_graded_full():
    [r] = C.run([C.by_name("stock_autotuned_add")], progress=False)
    assert r["score"] == r["points"], r["why"]
