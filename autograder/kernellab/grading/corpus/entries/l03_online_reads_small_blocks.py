"""honest control: lesson 03, attacks `online_softmax_reads`; expected: full points.

The online softmax in 512-wide blocks: more loop steps, still two reads per element (the replay counts every
load)."""
from ..edits import _sub
from ..entry import L3, Entry

ENTRY = Entry("online_reads_small_blocks", L3, "online_softmax_reads", "the online softmax in 512-wide blocks: more "
              "loop steps, still two reads per element (the replay counts every load)",
              _sub("online_softmax_code", "BLOCK=4096, num_warps=8)", "BLOCK=512, num_warps=4)"), expect="full")
