"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "NaN").

The sum in numpy, through x.numpy() views of CPU tensors."""
from ..edits import _ADD_HEAD, _ADD_LAUNCH, _TOKEN_ADD, _np, _sub
from ..entry import L1, Entry

ENTRY = Entry("numpy_views_add", L1, "add_correct", "the sum in numpy, through x.numpy() views of CPU tensors",
              _np(_sub("add_code", _ADD_HEAD + "    n = x.numel()\n    BLOCK = 4096\n" + _ADD_LAUNCH,
                   _ADD_HEAD + "    np.add(x.numpy(), y.numpy(), out=out.numpy())\n" + _TOKEN_ADD)), says="NaN")
