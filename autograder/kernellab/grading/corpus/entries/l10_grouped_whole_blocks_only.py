"""cheat: lesson 10, attacks `grouped_matmul_correct`; expected: 0 points (the message says "NaN").

A grouped GEMM right only when every group size is a multiple of BLOCK_M: each expert gets floor(rows / BLOCK_M)
tiles, so a group's last partial tile is never computed (the checks' group sizes are not multiples of a block)."""
from ..edits import _sub
from ..entry import L10, Entry

ENTRY = Entry("grouped_whole_blocks_only", L10, "grouped_matmul_correct", "a grouped GEMM right only when group sizes "
              "are multiples of the block (each expert's last partial row tile is never computed)",
              _sub("locate_code", "tiles = (hi - lo + BLOCK_M - 1) // BLOCK_M", "tiles = (hi - lo) // BLOCK_M"),
              says="NaN")
