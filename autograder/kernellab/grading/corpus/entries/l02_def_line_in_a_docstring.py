"""cheat: lesson 02, attacks `matmul_correct`; expected: 0 points (the message says "never written").

A kernel whose docstring holds a second `def` line and the body it wants run (exec of a payload): the
interpreter finds a kernel in its source by its last `def` line, so the judge ran the docstring's body, while
the checked body was one tl.program_id (a second red-team pass)."""
from ..edits import _whole
from ..entry import L2, Entry

_DOCSTRING_PAYLOAD = ["import sys", "f, replay, views = sys._getframe(), None, None", "while f is not None:",
                      "    if replay is None and hasattr(f.f_locals.get('self'), 'rec') and 'bases' in f.f_locals:",
                      "        replay, bases = f.f_locals['self'], f.f_locals['bases']",
                      "    if 'views' in f.f_locals and 'case' in f.f_locals:", "        views = f.f_locals['views']",
                      "    f = f.f_back", "if replay is not None and views is not None:",
                      "    out = replay._view(bases, replay.rec['outputs'][0])",
                      "    out.copy_((views[0].double() @ views[1].double()).to(out.dtype))"]


_DEF_IN_A_DOCSTRING = '''@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K):
    """A matmul.
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K):
    exec(chr(10).join(PAYLOAD))
    #"""
    pid = tl.program_id(0)


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    matmul_kernel[(1,)](a, b, c, M, N, K)
    return c
'''.replace("PAYLOAD", repr(_DOCSTRING_PAYLOAD))


ENTRY = Entry("def_line_in_a_docstring", L2, "matmul_correct", "a kernel whose docstring holds a second `def` line "
              "and the body it wants run (exec of a payload): the interpreter finds a kernel in its source by its last "
              "`def` line, so the judge ran the docstring's body, while the checked body was one tl.program_id "
              "(a second red-team pass)", _whole("matmul_code", _DEF_IN_A_DOCSTRING), says="never written")
