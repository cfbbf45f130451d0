"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "NaN").

The sum computed in another process (os.system via attrgetter), copied into the output through numpy."""
from ..edits import _FRAMES, _TOKEN_ADD
from ..entry import L1, Entry

_SUBPROCESS_ADD = "import numpy as np\n" + _FRAMES + """def add(x, y):
    out = torch.empty_like(x)
""" + _TOKEN_ADD + """    folder = OS.getcwd()
    np.save(folder + "/x.npy", x.numpy())
    np.save(folder + "/y.npy", y.numpy())
    OS.system(operator.attrgetter("sys.executable")(torch) + " -c 'import numpy as np; "
              "np.save(\\"out.npy\\", np.load(\\"x.npy\\") + np.load(\\"y.npy\\"))'")  # the work in another process
    out.numpy()[...] = np.load(folder + "/out.npy")
    return out
"""


ENTRY = Entry("subprocess_does_the_work", L1, "add_correct", "the sum computed in another process (os.system via "
              "attrgetter), copied into the output through numpy",
              lambda t: {"add_code": t["add_code"].split("def add(x, y):")[0] + _SUBPROCESS_ADD}, says="NaN")
