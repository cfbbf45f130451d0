"""cheat: lesson 02, attacks `matmul_correct`; expected: 0 points (the message says "wrong").

A grid function that computes the product on the host and asks for one program."""
from ..edits import _np, _sub
from ..entry import L2, Entry

ENTRY = Entry("grid_lambda_computes", L2, "matmul_correct", "a grid function that computes the product on the host "
              "and asks for one program", _np(_sub("matmul_code",
                                               "    grid = lambda meta: (-(M // -meta[\"BLOCK_M\"]) * -(N // -meta[\"BLOCK_N\"]),)  # ceil(M / BLOCK_M) * ceil(...)\n",
                                               "    def grid(meta):\n        c.numpy()[...] = (a.numpy().astype(np.float32) @ "
                                               "b.numpy().astype(np.float32)).astype(c.numpy().dtype)\n"
                                               "        return (1,)\n")), says="wrong")
