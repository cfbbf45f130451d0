"""cheat: lesson 01, attacks `add_bandwidth`; expected: graded as the kernel it recorded.

Work on a side stream, returning before it is done."""
from ..edits import _ADD_LAUNCH, _sub
from ..entry import L1, Entry

ENTRY = Entry("side_stream", L1, "add_bandwidth", "work on a side stream, returning before it is done",
              _sub("add_code", _ADD_LAUNCH, "    s = torch.cuda.Stream()\n    with torch.cuda.stream(s):\n"
                   + _ADD_LAUNCH.replace("    add", "        add")), gpu=True, expect="kernel", max_value=1.1)
