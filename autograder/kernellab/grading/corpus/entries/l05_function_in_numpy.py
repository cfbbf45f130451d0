"""cheat: lesson 05, attacks `attention_function_correct`; expected: 0 points (the message says "never written").

An autograd Function whose forward and backward compute in numpy on .numpy() views of the tensors, behind
token launches (numpy never reaches PyTorch's dispatcher, so the op watch sees nothing)."""
from ..edits import _whole
from ..entry import L5, Entry

_FUNCTION_IN_NUMPY = '''import math

import numpy as np


@triton.jit
def token_kernel(dst, BLOCK: tl.constexpr):
    tl.store(dst + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32))


def attention_numpy(q, k, v, causal):
    q, k, v = (t.detach().numpy().astype(np.float64) for t in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], dtype=bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True), q, k, v


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        token_kernel[(1,)](torch.empty(16, device=q.device), BLOCK=16)
        p, _, _, vn = attention_numpy(q, k, v, causal)
        o = torch.empty_like(q)
        o.detach().numpy()[...] = p @ vn
        ctx.save_for_backward(q, k, v)
        ctx.causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v = ctx.saved_tensors
        token_kernel[(1,)](torch.empty(16, device=q.device), BLOCK=16)
        p, qn, kn, vn = attention_numpy(q, k, v, ctx.causal)
        g = do.detach().numpy().astype(np.float64)
        dp = g @ np.swapaxes(vn, -1, -2)
        ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / math.sqrt(qn.shape[-1])
        grads = [torch.empty_like(t) for t in (q, k, v)]
        for grad, value in zip(grads, (ds @ kn, np.swapaxes(ds, -1, -2) @ qn, np.swapaxes(p, -1, -2) @ g)):
            grad.detach().numpy()[...] = value
        return (*grads, None)
'''


ENTRY = Entry("function_in_numpy", L5, "attention_function_correct", "an autograd Function whose forward and backward "
              "compute in numpy on .numpy() views of the tensors, behind token launches (numpy never reaches PyTorch's "
              "dispatcher, so the op watch sees nothing)", _whole("attention_function_code", _FUNCTION_IN_NUMPY),
              says="never written", interpreter=True)
