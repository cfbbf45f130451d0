"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "computed with PyTorch").

Torch op instead of a kernel (x + y)."""
from ..edits import _known
from ..entry import L1, Entry

ENTRY = Entry("torch_add", L1, "add_correct", "torch op instead of a kernel (x + y)",
              _known(L1, "torch_add"), says="computed with PyTorch")
