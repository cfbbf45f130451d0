"""cheat: lesson 07, attacks `compiled_block_correct`; expected: 0 points.

The attention op tells the block's first, eager and watched run from the compiled ones by counting its calls: the
eager run gets a kernel on zeroed queries (launches, rules and fakes all as they should be, the answer wrong), the
compiled runs the right answer. Graded on the compiled block's outputs in the worker (before 2026-11-28) that is
5/5. Now the worker compiles the block unrecorded and refuses a compiled run that differs from the eager one, and
the judge replays the recorded eager run and checks what it computed: each alone gives 0."""
from ..edits import _sub
from ..entry import L7, Entry

ENTRY = Entry("compiled_ops_differ_from_eager", L7, "compiled_block_correct", "tell the watched eager run from the "
              "compiled one inside a custom op (a call counter): a wrong answer eagerly, the right one compiled",
              _sub("custom_ops_code", "                       causal: bool) -> tuple[torch.Tensor, torch.Tensor]:\n"
                   "    return flash_attention(q, k, v, causal)\n",
                   "                       causal: bool) -> tuple[torch.Tensor, torch.Tensor]:\n"
                   "    CALLS[0] += 1\n    if CALLS[0] == 1:  # the first call: the eager run, watched\n"
                   "        return flash_attention(q * 0, k, v, causal)\n"
                   "    return flash_attention(q, k, v, causal)\n\n\nCALLS = [0]\n"))
