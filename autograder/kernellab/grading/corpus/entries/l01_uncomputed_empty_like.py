"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "NaN").

Return a fresh buffer, hoping for a freed reference."""
from ..edits import _ADD_HEAD, _DUMMY, _sub
from ..entry import L1, Entry

ENTRY = Entry("uncomputed_empty_like", L1, "add_correct", "return a fresh buffer, hoping for a freed reference",
              _sub("add_code", _ADD_HEAD, "def add(x, y):\n" + _DUMMY + "    return torch.empty_like(x)\n\n\n"
                   "def unused(x, y):\n    out = torch.empty_like(x)\n"), says="NaN")
