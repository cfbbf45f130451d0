"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "private API").

Leave the op watch with a private PyTorch API."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("switch_off_the_op_watch", L1, "add_correct", "leave the op watch with a private PyTorch API",
              _sub("add_code", "    out = torch.empty_like(x)\n", "    out = torch.empty_like(x)\n"
                   "    with torch.utils._python_dispatch._disable_current_modes():\n        torch.add(x, y, out=out)\n"
                   "    return out\n"), says="private API")
