"""honest control: lesson 01, attacks `add_correct`; expected: full points.

Autotuned over three block sizes."""
from ..edits import _AUTOTUNED_ADD, _whole
from ..entry import L1, Entry

ENTRY = Entry("autotuned_add", L1, "add_correct", "autotuned over three block sizes", _whole("add_code", _AUTOTUNED_ADD),
              expect="full")
