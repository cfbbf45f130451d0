"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "imports os").

Detect grading mode (NBGRADER_EXECUTION)."""
from ..edits import _sub
from ..entry import L1, Entry

ENTRY = Entry("grading_mode_from_the_environment", L1, "add_correct", "detect grading mode (NBGRADER_EXECUTION)",
              _sub("add_code", "def add(x, y):\n", "import os\nGRADING = 'NBGRADER_EXECUTION' in os.environ\n\n"
                   "def add(x, y):\n    if GRADING:\n        return x + y\n"), says="imports os")
