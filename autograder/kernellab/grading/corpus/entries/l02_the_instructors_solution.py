"""cheat: lesson 02, attacks `matmul_correct`; expected: 0 points (the message says "Permission").

The instructor's solution loaded from the grading machine's solutions/ folder with kernellab's own loader."""
from ..edits import _whole
from ..entry import L2, Entry

_LOAD_THE_SOLUTION = """from kernellab.notebook_cells import load_solution

matmul = load_solution("02_tiled_matmul", ("matmul",))["matmul"]
"""


ENTRY = Entry("the_instructors_solution", L2, "matmul_correct", "the instructor's solution loaded from the grading "
              "machine's solutions/ folder with kernellab's own loader",
              _whole("matmul_code", _LOAD_THE_SOLUTION), says="Permission", confined=True)
