"""honest control: lesson 02, attacks `matmul_correct`; expected: full points.

Two launches on sliced views (a[:h], c[:h] and a[h:], c[h:]): pointers into the middle of a buffer."""
from ..edits import _sub
from ..entry import L2, Entry

ENTRY = Entry("matmul_in_row_halves", L2, "matmul_correct", "two launches on sliced views (a[:h], c[:h] and a[h:], "
              "c[h:]): pointers into the middle of a buffer", _sub("matmul_code", "def matmul(a, b):\n    return _launch(a, b, None)\n",
                                                                   "def matmul(a, b):\n    M, h = a.shape[0], max(1, a.shape[0] // 2)\n"
                                                                   "    if M < 2:\n        return _launch(a, b, None)\n"
                                                                   "    c = torch.empty((M, b.shape[1]), device=a.device, dtype=a.dtype)\n"
                                                                   "    for lo, hi in ((0, h), (h, M)):\n"
                                                                   "        part = a.narrow(0, lo, hi - lo)\n"
                                                                   "        c[lo:hi] = 0  # a fill_ on a slice, then overwritten\n"
                                                                   "        _into(part, b, c[lo:hi])\n    return c\n\n\n"
                                                                   "def _into(a, b, c):\n    M, K = a.shape\n    N = b.shape[1]\n"
                                                                   "    grid = lambda meta: (triton.cdiv(M, meta[\"BLOCK_M\"]) * triton.cdiv(N, meta[\"BLOCK_N\"]),)\n"
                                                                   "    matmul_kernel[grid](a, b, c, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),\n"
                                                                   "                        c.stride(0), c.stride(1), GROUP_M=8, BIAS_GELU=False)\n"),
              expect="full")
