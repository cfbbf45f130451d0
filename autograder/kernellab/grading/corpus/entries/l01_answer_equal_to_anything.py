"""cheat: lesson 01, attacks `answers_add`; expected: 0 points (the message says "not right").

An answer object that equals everything."""
from ..edits import _whole
from ..entry import L1, Entry

ENTRY = Entry("answer_equal_to_anything", L1, "answers_add", "an answer object that equals everything",
              _whole("answers_add_code", "class Anything(float):\n    def __eq__(self, other):\n        return True\n\n"
                     "ADD_BYTES = ADD_FLOPS = ADD_INTENSITY = ADD_BOUND = Anything(0.0)\n"), says="not right")
