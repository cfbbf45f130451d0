"""cheat: lesson 02, attacks `matmul_correct`; expected: 0 points (the message says "not the language").

A kernel body that reaches Python's exec through triton.knobs (re -> enum -> builtins): in the CPU interpreter
the judge runs kernel bodies, and the payload writes the product computed in numpy into the judge's output."""
from ..edits import _whole
from ..entry import L2, Entry

_EXEC_THROUGH_KNOBS = '''PAYLOAD = """
import sys, inspect, numpy as np
f = sys._getframe(1)
while f is not None and "args_hst" not in f.f_locals:
    f = f.f_back
a = inspect.getcallargs(f.f_locals["self"].fn, *f.f_locals["args_hst"], **f.f_locals["kwargs_hst"])
M, N, K = int(a["M"]), int(a["N"]), int(a["K"])
def view(t, rows, cols, s0, s1):
    x = t.numpy()
    return np.lib.stride_tricks.as_strided(x, shape=(rows, cols), strides=(s0 * x.itemsize, s1 * x.itemsize))
out = view(a["c_ptr"], M, N, a["scm"], a["scn"])
out[...] = view(a["a_ptr"], M, K, a["sam"], a["sak"]).astype(np.float64) @ view(a["b_ptr"], K, N, a["sbk"], a["sbn"])
"""


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn):
    triton.knobs.re.enum.bltns.exec(PAYLOAD, {})


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    matmul_kernel[(1,)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c
'''


ENTRY = Entry("exec_in_the_judges_interpreter", L2, "matmul_correct", "a kernel body that reaches Python's exec "
              "through triton.knobs (re -> enum -> builtins): in the CPU interpreter the judge runs kernel bodies, and "
              "the payload writes the product computed in numpy into the judge's output",
              _whole("matmul_code", _EXEC_THROUGH_KNOBS), says="not the language")
