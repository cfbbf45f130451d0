"""cheat: lesson 03, attacks `softmax_correct`; expected: 0 points (the message says "computed with PyTorch").

F.softmax inside the graded function."""
from ..edits import _sub
from ..entry import L3, Entry

ENTRY = Entry("softmax_with_torch", L3, "softmax_correct", "F.softmax inside the graded function",
              _sub("softmax_code", "    return out\n", "    return F.softmax(x.float(), dim=1).to(x.dtype)\n"),
              says="computed with PyTorch")
