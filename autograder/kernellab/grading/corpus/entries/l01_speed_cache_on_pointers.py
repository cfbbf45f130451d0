"""cheat: lesson 01, attacks `add_bandwidth`; expected: graded as the kernel it recorded.

Replay the last result when the inputs sit at the same address (timed reps)."""
from ..edits import _cache_edit
from ..entry import L1, Entry

ENTRY = Entry("speed_cache_on_pointers", L1, "add_bandwidth", "replay the last result when the inputs sit at the same "
              "address (timed reps)", lambda t: _cache_edit("x.data_ptr(), y.data_ptr(), x.numel()")(t), gpu=True,
              expect="kernel", max_value=1.1)
