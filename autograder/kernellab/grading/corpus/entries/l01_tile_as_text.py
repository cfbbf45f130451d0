"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "Triton's compiler refuses").

Python inside an interpreted kernel: `"%s" % tile` turns a loaded tile into text (and from there `split` and
`float` into Python numbers, 2026-11-28: the sum done in Python scored 4/4). Triton's compiler cannot format a
tensor, so the judge never runs it."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("tile_as_text", L1, "add_correct", "Python in an interpreted kernel: a tile formatted as text",
              _sub("add_code", "    tl.store(out_ptr + offsets, x + y, mask=mask)\n",
                   "    shown = \"%s\" % x\n    tl.store(out_ptr + offsets, x + y, mask=mask)\n"),
              says="Triton's compiler refuses", interpreter=True)
