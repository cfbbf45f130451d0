"""honest control: lesson 01, attacks `add_bandwidth`; expected: the speed points it earns.

Autotuned add, timed."""
from ..edits import _AUTOTUNED_ADD, _whole
from ..entry import L1, Entry

ENTRY = Entry("autotuned_add_speed", L1, "add_bandwidth", "autotuned add, timed", _whole("add_code", _AUTOTUNED_ADD),
              expect="earned", gpu=True)
