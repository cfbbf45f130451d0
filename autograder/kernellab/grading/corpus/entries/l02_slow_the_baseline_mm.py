"""cheat: lesson 02, attacks `matmul_speed`; expected: graded as the kernel it recorded.

Slow the baseline: a torch.library CUDA kernel registered for aten::mm in the learner's cell (3.72x cuBLAS on
the old path)."""
from ..edits import _whole
from ..entry import L2, Entry

_SLOW_MM = """
SLOW_ATEN = torch.library.Library("aten", "IMPL")


def slow_mm(a, b):  # the same product three times over, through bmm: correct, about 3x slower than cuBLAS
    out = torch.bmm(a.unsqueeze(0), b.unsqueeze(0))[0]
    for k in range(2):
        out = torch.bmm(a.unsqueeze(0), b.unsqueeze(0))[0]
    return out


SLOW_ATEN.impl("mm", slow_mm, "CUDA")
"""


ENTRY = Entry("slow_the_baseline_mm", L2, "matmul_speed", "slow the baseline: a torch.library CUDA kernel registered "
              "for aten::mm in the learner's cell (3.72x cuBLAS on the old path)",
              _whole("matmul_code", _SLOW_MM, keep_solution=True), gpu=True, expect="kernel", max_value=1.15)
