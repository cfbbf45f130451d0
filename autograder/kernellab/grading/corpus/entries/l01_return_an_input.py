"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "input").

Write the sum into an input and return it."""
from ..edits import _ADD_HEAD, _ADD_LAUNCH, _sub
from ..entry import L1, Entry

ENTRY = Entry("return_an_input", L1, "add_correct", "write the sum into an input and return it",
              _sub("add_code", _ADD_HEAD + "    n = x.numel()\n    BLOCK = 4096\n" + _ADD_LAUNCH + "    return out\n",
                   "def add(x, y):\n    n = x.numel()\n    BLOCK = 4096\n" + _ADD_LAUNCH.replace("(x, y, out,", "(x, y, x,")
                   + "    return x\n"), says="input")
