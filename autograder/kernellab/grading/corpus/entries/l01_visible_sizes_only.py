"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "never written").

Right only for the sizes the notebook shows."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("visible_sizes_only", L1, "add_correct", "right only for the sizes the notebook shows",
              _sub("add_code", "    n = x.numel()\n", "    n = x.numel()\n    if n not in (1000, 4096, 1 << 20):\n"
                   "        n = n // 2\n"), says="never written")
