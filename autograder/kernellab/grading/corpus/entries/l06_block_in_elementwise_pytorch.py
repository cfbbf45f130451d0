"""cheat: lesson 06, attacks `block_correct`; expected: 0 points (the message says "computed with PyTorch").

The whole block in PyTorch ops outside the attention and LayerNorm lists (a broadcast product summed for Q
K^T, expm1 for exp, means and a log for the statistics), beside two token launches."""
from ..edits import _whole
from ..entry import L6, Entry

_BLOCK_ELEMENTWISE = '''@triton.jit
def token_kernel(dst, BLOCK: tl.constexpr):
    tl.store(dst + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32))


def layernorm_in_torch(h, w, b, eps):
    mu = h.mean(dim=-1, keepdim=True)
    var = ((h - mu) * (h - mu)).mean(dim=-1, keepdim=True)
    return (h - mu) * (torch.expm1(-0.5 * torch.log(var + eps)) + 1) * w + b


def block_forward(x, params, n_heads):
    p = params
    for _ in range(2):
        token_kernel[(1,)](torch.empty(16, device=x.device), BLOCK=16)
    B, N, d = x.shape
    qkv = F.linear(x, p.w_qkv, p.b_qkv).view(B, N, 3, n_heads, d // n_heads).float()
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    s = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1) / math.sqrt(d // n_heads)
    s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device=x.device).triu(1), -float("inf"))
    e = torch.expm1(s - s.amax(-1, keepdim=True)) + 1
    a = ((e / e.sum(-1, keepdim=True)).unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)
    a = a.transpose(1, 2).reshape(B, N, d).to(x.dtype)
    h = layernorm_in_torch((x + F.linear(a, p.w_o, p.b_o)).float(), p.ln1_w.float(), p.ln1_b.float(), 1e-5)
    h = h.to(x.dtype)
    m = F.linear(F.gelu(F.linear(h, p.w_1, p.b_1)), p.w_2, p.b_2)
    return layernorm_in_torch((h + m).float(), p.ln2_w.float(), p.ln2_b.float(), 1e-5).to(x.dtype)
'''


ENTRY = Entry("block_in_elementwise_pytorch", L6, "block_correct", "the whole block in PyTorch ops outside the "
              "attention and LayerNorm lists (a broadcast product summed for Q K^T, expm1 for exp, means and a log for "
              "the statistics), beside two token launches", _whole("block_code", _BLOCK_ELEMENTWISE),
              says="computed with PyTorch")
