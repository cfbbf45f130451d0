"""honest control: lesson 02, attacks `matmul_correct`; expected: full points.

One autotune config, no grouped order."""
from ..edits import _known
from ..entry import L2, Entry

ENTRY = Entry("one_config_no_grouping", L2, "matmul_correct", "one autotune config, no grouped order",
              _known(L2, "one_config_no_grouping"), expect="full")
