"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "differ").

Races or nondeterminism (a different result each call)."""
from ..entry import L1, Entry

ENTRY = Entry("nondeterministic_noise", L1, "add_correct", "races or nondeterminism (a different result each call)",
              lambda t: {"add_code": t["add_code"].replace("tl.store(out_ptr + offsets, x + y, mask=mask)",
                                                             "tl.store(out_ptr + offsets, x + y + (tl.rand(SEED, offsets) - 0.5)"
                                                             " * 1e-6 * x, mask=mask)").replace(
                  "def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):",
                  "def add_kernel(x_ptr, y_ptr, out_ptr, n, SEED, BLOCK: tl.constexpr):").replace(
                  "(x, y, out, n, BLOCK=BLOCK", "(x, y, out, n, next(COUNTER), BLOCK=BLOCK").replace(
                  "@triton.jit", "import itertools\n\nCOUNTER = itertools.count(1)\n\n\n@triton.jit")}, says="differ")
