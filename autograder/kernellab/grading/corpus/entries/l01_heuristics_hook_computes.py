"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "NaN").

A triton.heuristics hook that computes the answer on the host, the kernel then does nothing."""
from ..edits import _whole
from ..entry import L1, Entry

_HEURISTIC_ADD = """import numpy as np


def host_sum(args):  # runs on the host before the kernel: the whole answer in numpy
    np.add(args["x_ptr"].numpy(), args["y_ptr"].numpy(), out=args["out_ptr"].numpy())
    return True


@triton.heuristics({"DONE": host_sum})
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, DONE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    if not DONE:
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, x.numel(), BLOCK=16)
    return out
"""


ENTRY = Entry("heuristics_hook_computes", L1, "add_correct", "a triton.heuristics hook that computes the answer on the "
              "host, the kernel then does nothing", _whole("add_code", _HEURISTIC_ADD), says="NaN")
