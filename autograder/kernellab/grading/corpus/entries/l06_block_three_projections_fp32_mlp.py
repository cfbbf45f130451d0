"""honest control: lesson 06, attacks `block_correct`; expected: full points.

Q, k, v from three linear layers on slices of the weight, the MLP's first layer in fp32."""
from ..edits import _whole
from ..entry import L6, Entry

_BLOCK_THREE_PROJECTIONS = '''def block_forward(x, params, n_heads):
    p = params
    B, N, d = x.shape
    heads = [F.linear(x, p.w_qkv[i * d:(i + 1) * d], p.b_qkv[i * d:(i + 1) * d]).view(B, N, n_heads, d // n_heads)
             for i in range(3)]
    q, k, v = (t.transpose(1, 2) for t in heads)
    a = FlashAttention.apply(q.contiguous(), k.contiguous(), v.contiguous(), True).transpose(1, 2).reshape(B, N, d)
    h = AddLayerNorm.apply(x, F.linear(a, p.w_o, p.b_o), p.ln1_w, p.ln1_b, 1e-5)
    u = F.linear(h.float(), p.w_1.float(), p.b_1.float())
    m = F.linear(F.gelu(u).half(), p.w_2, p.b_2)
    return AddLayerNorm.apply(h, m, p.ln2_w, p.ln2_b, 1e-5)
'''


ENTRY = Entry("block_three_projections_fp32_mlp", L6, "block_correct", "q, k, v from three linear layers on slices of "
              "the weight, the MLP's first layer in fp32", _whole("block_code", _BLOCK_THREE_PROJECTIONS), expect="full")
