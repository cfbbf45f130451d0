"""cheat: lesson 06, attacks `block_correct`; expected: 0 points (the message says "neither is a weight").

Attention written from per-head torch.mm products (the linear layers' op), tanh for exp and fill_ for the
causal mask, beside the learner's own LayerNorm kernels."""
from ..edits import _whole
from ..entry import L6, Entry

_BLOCK_PER_HEAD_MM = '''def attention_per_head(q, k, v):
    B, H, N, D = q.shape
    keep = torch.empty(N, N, device=q.device).fill_(1.0)
    for i in range(N - 1):
        keep[i, i + 1:] = 0.0
    ones = torch.empty(N, 1, device=q.device).fill_(1.0)
    out = torch.empty(B, H, N, D, device=q.device)
    for b in range(B):
        for h in range(H):
            s = torch.mm(q[b, h].float(), k[b, h].float().t()) * (1.0 / math.sqrt(D))
            t = torch.tanh(s * 0.5)
            e = (t + 1) / -(t - 1) * keep  # exp(s) = (1 + tanh(s/2)) / (1 - tanh(s/2))
            out[b, h] = torch.mm(e / torch.mm(e, ones), v[b, h].float())
    return out.to(q.dtype)


def block_forward(x, params, n_heads):
    p = params
    B, N, d = x.shape
    qkv = F.linear(x, p.w_qkv, p.b_qkv).view(B, N, 3, n_heads, d // n_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    a = attention_per_head(q, k, v).transpose(1, 2).reshape(B, N, d)
    h = AddLayerNorm.apply(x, F.linear(a, p.w_o, p.b_o), p.ln1_w, p.ln1_b, 1e-5)
    m = F.linear(F.gelu(F.linear(h, p.w_1, p.b_1)), p.w_2, p.b_2)
    return AddLayerNorm.apply(h, m, p.ln2_w, p.ln2_b, 1e-5)
'''


ENTRY = Entry("block_attention_per_head", L6, "block_correct", "attention written from per-head torch.mm products "
              "(the linear layers' op), tanh for exp and fill_ for the causal mask, beside the learner's own LayerNorm "
              "kernels", _whole("block_code", _BLOCK_PER_HEAD_MM), says="neither is a weight")
