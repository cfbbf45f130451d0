"""cheat: lesson 02, attacks `matmul_correct`; expected: 0 points (the message says "computed with PyTorch").

Torch.matmul inside the graded function."""
from ..edits import _sub
from ..entry import L2, Entry

ENTRY = Entry("matmul_with_torch", L2, "matmul_correct", "torch.matmul inside the graded function",
              _sub("matmul_code", "def matmul(a, b):\n    return _launch(a, b, None)\n",
                   "def matmul(a, b):\n    _launch(a, b, None)\n    return torch.matmul(a, b)\n"),
              says="computed with PyTorch")
