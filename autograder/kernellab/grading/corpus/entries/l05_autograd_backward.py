"""cheat: lesson 05, attacks `flash_backward_correct`; expected: 0 points (the message says "computed with PyTorch").

Torch autograd in place of the backward kernels."""
from ..edits import _whole
from ..entry import L5, Entry

ENTRY = Entry("autograd_backward", L5, "flash_backward_correct", "torch autograd in place of the backward kernels",
              _whole("flash_backward_code", "def flash_attention_backward(q, k, v, o, lse, do, causal):\n"
                     "    with torch.enable_grad():\n        q2, k2, v2 = (t.detach().requires_grad_() for t in (q, k, v))\n"
                     "        o2 = F.scaled_dot_product_attention(q2, k2, v2, is_causal=bool(causal))\n"
                     "        return torch.autograd.grad(o2, (q2, k2, v2), do)\n"), says="computed with PyTorch")
