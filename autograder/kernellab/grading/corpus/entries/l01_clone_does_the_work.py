"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "NaN").

A Tensor subclass whose clone() does the work after the call."""
from ..edits import _TOKEN_ADD
from ..entry import L1, Entry

_CLONE_ADD = """import numpy as np

PARTS = {}  # output address -> the inputs (attributes do not survive the grader's detach())


class Sum(torch.Tensor):
    def clone(self, *args, **kwargs):  # the grader copies the result: the work happens here, after the call
        plain = self.as_subclass(torch.Tensor)
        x, y = PARTS[plain.data_ptr()]
        np.add(x.numpy(), y.numpy(), out=plain.numpy())
        return plain.clone(*args, **kwargs)


def add(x, y):
    out = torch.empty_like(x)
""" + _TOKEN_ADD.replace("torch.empty_like(x)", "out") + """    PARTS[out.data_ptr()] = (x, y)
    return out.as_subclass(Sum)
"""


ENTRY = Entry("clone_does_the_work", L1, "add_correct", "a Tensor subclass whose clone() does the work after the call",
              lambda t: {"add_code": t["add_code"].split("def add(x, y):")[0] + _CLONE_ADD}, says="NaN")
