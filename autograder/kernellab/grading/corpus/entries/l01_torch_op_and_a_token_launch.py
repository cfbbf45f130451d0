"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "computed with PyTorch").

A token Triton launch, the work in torch."""
from ..edits import _ADD_HEAD, _DUMMY, _sub
from ..entry import L1, Entry

ENTRY = Entry("torch_op_and_a_token_launch", L1, "add_correct", "a token Triton launch, the work in torch",
              _sub("add_code", _ADD_HEAD, _ADD_HEAD + "    torch.add(x, y, out=out)\n" + _DUMMY + "    return out\n"),
              says="computed with PyTorch")
