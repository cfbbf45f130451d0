"""cheat: lesson 05, attacks `flash_backward_correct`; expected: 0 points (the message says "neither an input nor allocated").

Delta in a buffer allocated when the cell runs."""
from ..edits import _sub
from ..entry import L5, Entry

ENTRY = Entry("backward_scratch_made_before_the_call", L5, "flash_backward_correct", "delta in a buffer allocated "
              "when the cell runs", lambda t: {"flash_backward_code": "SCRATCH = torch.empty(1 << 20, dtype=torch.float32)\n\n"
              + _sub("flash_backward_code", "    delta = torch.empty((B, H, N), dtype=torch.float32, device=q.device)\n",
                     "    delta = SCRATCH[:B * H * N].view(B, H, N)  # no allocation in the call\n")(t)["flash_backward_code"]},
              says="neither an input nor allocated")
