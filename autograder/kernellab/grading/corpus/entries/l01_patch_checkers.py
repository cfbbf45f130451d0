"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "replaces").

Monkeypatch torch.allclose / math.isclose / the checker."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("patch_checkers", L1, "add_correct", "monkeypatch torch.allclose / math.isclose / the checker",
              _sub("add_code", "def add(x, y):\n", "import math\ntorch.allclose = lambda *a, **k: True\n"
                   "math.isclose = lambda *a, **k: True\nkl.compare.compare = lambda *a, **k: True\n"
                   "def add(x, y):\n"), says="replaces")
