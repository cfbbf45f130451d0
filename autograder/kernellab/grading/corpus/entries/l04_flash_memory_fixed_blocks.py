"""honest control: lesson 04, attacks `flash_attention_memory`; expected: full points.

FlashAttention with fixed 32 x 16 blocks: only the output and the lse are allocated (the memory check counts
unreturned bytes)."""
from ..entry import L4, Entry

ENTRY = Entry("flash_memory_fixed_blocks", L4, "flash_attention_memory", "FlashAttention with fixed 32 x 16 blocks: "
              "only the output and the lse are allocated (the memory check counts unreturned bytes)",
              lambda t: {"flash_attention_code": t["flash_attention_code"].replace(
                  "@kl.autotune(configs=FWD_CONFIGS, key=[\"N_CTX\", \"HEAD_DIM\", \"CAUSAL\"])\n", "").replace(
                  "HEAD_DIM=D, CAUSAL=bool(causal))", "HEAD_DIM=D, CAUSAL=bool(causal), BLOCK_M=32, BLOCK_N=16)")},
              expect="full")
