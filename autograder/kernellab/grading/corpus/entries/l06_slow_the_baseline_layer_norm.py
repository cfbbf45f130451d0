"""cheat: lesson 06, attacks `block_speed`; expected: graded as the kernel it recorded.

Slow the eager block's LayerNorm (a torch.library CUDA kernel for aten::native_layer_norm) where the learner's
block uses its own kernel; the baseline is timed in a judge process."""
from ..edits import _whole
from ..entry import L6, Entry

_SLOW_LN = """
SLOW_ATEN_LN = torch.library.Library("aten", "IMPL")


def slow_layer_norm(x, shape, weight, bias, eps):  # right, and four times the work: only the eager baseline uses it
    for k in range(4):
        xf = x.float()
        mean = xf.mean(-1, keepdim=True)
        rstd = torch.rsqrt(xf.var(-1, unbiased=False, keepdim=True) + eps)
    y = (xf - mean) * rstd * weight.float() + bias.float()
    return y.to(x.dtype), mean, rstd


SLOW_ATEN_LN.impl("native_layer_norm", slow_layer_norm, "CUDA")
"""


ENTRY = Entry("slow_the_baseline_layer_norm", L6, "block_speed", "slow the eager block's LayerNorm (a torch.library CUDA "
              "kernel for aten::native_layer_norm) where the learner's block uses its own kernel; the baseline is timed "
              "in a judge process", _whole("block_code", _SLOW_LN, keep_solution=True),
              gpu=True, expect="kernel", max_value=7.0)
