"""cheat: lesson 06, attacks `layernorm_function_correct`; expected: 0 points (the message says "computed with PyTorch").

PyTorch's LayerNorm in the Function's forward (lesson 06 lets cuBLAS stay, not this)."""
from ..edits import _known
from ..entry import L6, Entry

ENTRY = Entry("layernorm_forward_with_torch", L6, "layernorm_function_correct", "PyTorch's LayerNorm in the Function's "
              "forward (lesson 06 lets cuBLAS stay, not this)", _known(L6, "torch_layernorm_forward"), says="computed with PyTorch")
