"""cheat: lesson 06, attacks `block_speed`; expected: graded as the kernel it recorded.

Tell the watched call from the timed ones (an allocation inside a larger guarded buffer): the learner's
kernels eight times over when watched, PyTorch's SDPA and LayerNorm when timed (timed in the worker before
2026-11-27)."""
from ..edits import _whole
from ..entry import L6, Entry

_BLOCK_WATCHED_OR_SDPA = """
honest_block = block_forward


def block_forward(x, params, n_heads):
    probe = torch.empty(16, device=x.device)
    if probe.untyped_storage().nbytes() > probe.numel() * probe.element_size():
        for _ in range(7):
            honest_block(x, params, n_heads)
        return honest_block(x, params, n_heads)
    p = params
    B, N, d = x.shape
    qkv = F.linear(x, p.w_qkv, p.b_qkv).view(B, N, 3, n_heads, d // n_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, N, d)
    h = F.layer_norm(x + F.linear(a, p.w_o, p.b_o), (d,), p.ln1_w, p.ln1_b, 1e-5)
    m = F.linear(F.gelu(F.linear(h, p.w_1, p.b_1)), p.w_2, p.b_2)
    return F.layer_norm(h + m, (d,), p.ln2_w, p.ln2_b, 1e-5)
"""


ENTRY = Entry("block_watched_or_sdpa", L6, "block_speed", "tell the watched call from the timed ones (an allocation "
              "inside a larger guarded buffer): the learner's kernels eight times over when watched, PyTorch's SDPA and "
              "LayerNorm when timed (timed in the worker before 2026-11-27)",
              _whole("block_code", _BLOCK_WATCHED_OR_SDPA, keep_solution=True), gpu=True, expect="kernel", max_value=1.2)
