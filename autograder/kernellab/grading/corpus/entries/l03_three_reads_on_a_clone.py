"""cheat: lesson 03, attacks `online_softmax_reads`; expected: 0 points (the message says "read").

Three passes over a clone of the input (the counter watches the input only)."""
from ..edits import _THREE_READS_ON_A_CLONE, _whole
from ..entry import L3, Entry

ENTRY = Entry("three_reads_on_a_clone", L3, "online_softmax_reads", "three passes over a clone of the input (the "
              "counter watches the input only)", _whole("online_softmax_code", _THREE_READS_ON_A_CLONE), says="read")
