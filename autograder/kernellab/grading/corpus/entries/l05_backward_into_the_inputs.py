"""cheat: lesson 05, attacks `flash_backward_correct`; expected: 0 points (the message says "input").

Dq written into q's memory and returned."""
from ..edits import _sub
from ..entry import L5, Entry

ENTRY = Entry("backward_into_the_inputs", L5, "flash_backward_correct", "dq written into q's memory and returned",
              _sub("flash_backward_code", "    dq = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)\n",
                   "    dq = q  # no new memory: the gradient lands where q was\n"), says="input")
