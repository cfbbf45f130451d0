"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "Triton's compiler refuses").

Python inside an interpreted kernel: a `match` statement whose class pattern names the interpreter's `handle`
attribute as a string, which no allow-list of syntax reads (2026-11-28: from there `exec` ran in the judge). The
judge now interprets a kernel only after Triton's compiler accepts it, and the compiler has no `match`."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("match_case_in_the_kernel", L1, "add_correct", "Python in an interpreted kernel: a match/case class "
              "pattern reaching the interpreter's handle",
              _sub("add_code", "    tl.store(out_ptr + offsets, x + y, mask=mask)\n",
                   "    match x:\n        case tl.tensor(handle=h):\n            pass\n"
                   "    tl.store(out_ptr + offsets, x + y, mask=mask)\n"),
              says="Triton's compiler refuses", interpreter=True)
