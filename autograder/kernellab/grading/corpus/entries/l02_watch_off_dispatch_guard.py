"""cheat: lesson 02, attacks `matmul_correct`; expected: 0 points (the message says "NaN").

PyTorch's dispatch switched off with torch._C._DisableTorchDispatch, reached by attrgetter."""
from ..entry import L2, Entry

ENTRY = Entry("watch_off_dispatch_guard", L2, "matmul_correct", "PyTorch's dispatch switched off with "
              "torch._C._DisableTorchDispatch, reached by attrgetter", lambda t: {"matmul_code": "import operator\n\n"
              "NO_DISPATCH = operator.attrgetter('_C._DisableTorchDispatch')(torch)\n\n\n" + t["matmul_code"].replace(
                  "def matmul(a, b):\n    return _launch(a, b, None)\n",
                  "def matmul(a, b):\n    c = _launch(a[:16, :16], b[:16, :16], None)  # a token launch\n"
                  "    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)\n"
                  "    with NO_DISPATCH():\n        torch.matmul(a, b, out=c)\n    return c\n")}, says="NaN")
