"""cheat: lesson 06, attacks `block_correct`; expected: 0 points (the message says "torch.compile").

Torch.compile inside a graded function."""
from ..edits import _sub
from ..entry import L6, Entry

ENTRY = Entry("torch_compile_in_the_block", L6, "block_correct", "torch.compile inside a graded function",
              _sub("block_code", "def block_forward(x, params, n_heads):\n",
                   "def _eager(x, p, n_heads):\n    B, N, d = x.shape\n    return x\n\n"
                   "fast = torch.compile(_eager)\n\ndef block_forward(x, params, n_heads):\n"), says="torch.compile")
