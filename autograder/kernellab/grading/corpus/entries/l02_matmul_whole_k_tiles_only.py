"""cheat: lesson 02, attacks `matmul_correct`; expected: 0 points (the message says "wrong").

Right only when K is a multiple of the K tile."""
from ..edits import _sub
from ..entry import L2, Entry

ENTRY = Entry("matmul_whole_k_tiles_only", L2, "matmul_correct", "right only when K is a multiple of the K tile",
              _sub("matmul_code", "for k in range(0, tl.cdiv(K, BLOCK_K)):", "for k in range(0, K // BLOCK_K):"),
              says="wrong")
