"""honest control: lesson 04, attacks `flash_attention_correct`; expected: full points.

Fixed 32 x 16 blocks instead of autotuning."""
from ..entry import L4, Entry

ENTRY = Entry("other_flash_blocks", L4, "flash_attention_correct", "fixed 32 x 16 blocks instead of autotuning",
              lambda t: {"flash_attention_code": t["flash_attention_code"].replace(
                  "@kl.autotune(configs=FWD_CONFIGS, key=[\"N_CTX\", \"HEAD_DIM\", \"CAUSAL\"])\n", "").replace(
                  "HEAD_DIM=D, CAUSAL=bool(causal))", "HEAD_DIM=D, CAUSAL=bool(causal), BLOCK_M=32, BLOCK_N=16)")},
              expect="full")
