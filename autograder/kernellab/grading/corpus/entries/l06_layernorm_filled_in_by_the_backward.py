"""cheat: lesson 06, attacks `layernorm_function_correct`; expected: 0 points (the message says "wrong").

A forward that launches a token kernel and returns an empty y, which its backward (where PyTorch is allowed)
fills in with the LayerNorm computed in PyTorch."""
from ..edits import _whole
from ..entry import L6, Entry

_LN_FROM_THE_BACKWARD = '''@triton.jit
def token_kernel(dst, BLOCK: tl.constexpr):
    tl.store(dst + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32))


class AddLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, weight, bias, eps):
        y = torch.empty_like(x)
        token_kernel[(1,)](torch.empty(16, device=x.device), BLOCK=16)
        ctx.save_for_backward(x, residual, weight, bias)
        ctx.eps, ctx.y = eps, y.detach()
        return y

    @staticmethod
    def backward(ctx, dy):
        leaves = [t.detach().float().requires_grad_() for t in ctx.saved_tensors]
        with torch.enable_grad():
            h = leaves[0] + leaves[1]
            mu = h.mean(dim=-1, keepdim=True)
            hat = (h - mu) * torch.rsqrt(((h - mu) ** 2).mean(dim=-1, keepdim=True) + ctx.eps)
            y = hat * leaves[2] + leaves[3]
        ctx.y.copy_(y.detach().to(ctx.y.dtype))  # y gets its values only now
        grads = torch.autograd.grad(y, leaves, dy.float())
        return (*(g.to(t.dtype) for g, t in zip(grads, ctx.saved_tensors)), None)
'''


ENTRY = Entry("layernorm_filled_in_by_the_backward", L6, "layernorm_function_correct", "a forward that launches a "
              "token kernel and returns an empty y, which its backward (where PyTorch is allowed) fills in with the "
              "LayerNorm computed in PyTorch", _whole("layernorm_function_code", _LN_FROM_THE_BACKWARD), says="wrong")
