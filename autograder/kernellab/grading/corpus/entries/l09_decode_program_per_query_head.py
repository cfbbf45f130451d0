"""cheat: lesson 09, attacks `gqa_reads`; expected: 0 points (the message says "reads the whole cache G times").

A correct decode kernel with one program per query head: every K block is loaded once per head of its group."""
from ..edits import _whole
from ..entry import L9, Entry

_PER_HEAD = '''@triton.jit
def per_head_kernel(q_ptr, k_ptr, v_ptr, lens_ptr, o_ptr, lse_ptr, Hq, Hkv, n_max,
                    D: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    b, hq = pid // Hq, pid % Hq
    kv = (b * Hkv + hq // (Hq // Hkv)) * n_max * D
    n = tl.load(lens_ptr + b)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + pid * D + d).to(tl.float32)
    m, l_sum, acc = -float("inf"), 0.0, tl.zeros([D], tl.float32)
    for start in range(0, n, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        keep = cols < n
        k = tl.load(k_ptr + kv + cols[:, None] * D + d[None, :], mask=keep[:, None], other=0.0).to(tl.float32)
        s = tl.where(keep, tl.sum(k * q[None, :], 1) / tl.sqrt(D * 1.0), -float("inf"))
        m_new = tl.maximum(m, tl.max(s, 0))
        p = tl.exp(s - m_new)
        v = tl.load(v_ptr + kv + cols[:, None] * D + d[None, :], mask=keep[:, None], other=0.0).to(tl.float32)
        alpha = tl.exp(m - m_new)
        l_sum = l_sum * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * v, 0)
        m = m_new
    tl.store(o_ptr + pid * D + d, (acc / l_sum).to(tl.float16))
    tl.store(lse_ptr + pid, m + tl.log(l_sum))


def decode_attention(q, k_cache, v_cache, seq_lens):
    B, Hq, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((B, Hq), dtype=torch.float32, device=q.device)
    per_head_kernel[(B * Hq,)](q, k_cache, v_cache, seq_lens, o, lse, Hq, k_cache.shape[1], k_cache.shape[2],
                               D=D, BLOCK_N=32)
    return o, lse
'''

ENTRY = Entry("decode_program_per_query_head", L9, "gqa_reads",
              "a program per query head: each K block loaded once per head of its group",
              _whole("decode_code", _PER_HEAD), says="reads the whole cache G times")
