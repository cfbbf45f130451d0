"""honest control: lesson 02, attacks `matmul_correct`; expected: full points.

Stock triton.autotune over the split count with reset_to_zero on the fp32 atomic accumulator."""
from ..edits import _SPLIT_K, _whole
from ..entry import L2, Entry

_RESET_TO_ZERO_SPLIT_K = _SPLIT_K.replace(
    "@triton.jit\ndef splitk_kernel(",
    "@triton.autotune(configs=[triton.Config({'SPLIT': 2}), triton.Config({'SPLIT': 4})], key=['M', 'N', 'K'],\n"
    "                 reset_to_zero=['acc_ptr'])\n@triton.jit\ndef splitk_kernel(").replace(
    "    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64), 4)\n",
    "    grid = lambda meta: (triton.cdiv(M, 64), triton.cdiv(N, 64), meta['SPLIT'])\n").replace(
    "BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, SPLIT=4)", "BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)")


ENTRY = Entry("split_k_reset_to_zero", L2, "matmul_correct", "stock triton.autotune over the split count with "
              "reset_to_zero on the fp32 atomic accumulator", _whole("matmul_code", _RESET_TO_ZERO_SPLIT_K), expect="full")
