"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "threading").

Compute with torch on a helper thread the watch cannot see."""
from ..edits import _DUMMY, _sub
from ..entry import L1, Entry

ENTRY = Entry("torch_op_on_a_thread", L1, "add_correct", "compute with torch on a helper thread the watch cannot see",
              _sub("add_code", "def add(x, y):\n    out = torch.empty_like(x)\n",
                   "import threading\n\ndef add(x, y):\n    out = torch.empty_like(x)\n"
                   "    t = threading.Thread(target=lambda: torch.add(x, y, out=out))\n    t.start()\n    t.join()\n"
                   + _DUMMY + "    return out\n"), says="threading")
