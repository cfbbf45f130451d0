"""What several corpus entries share: edits of a solution's cells (replace a line, set a whole cell, take a
known-wrong submission) and the sources more than one entry builds on."""
from __future__ import annotations

from kernellab.grading.instructor import submissions as S
from kernellab.paths import repo_root


def _notebooks(lesson: str):
    root = repo_root()
    return (S.read(root / "notebooks" / lesson / f"{lesson}.ipynb"),
            S.read(root / "solutions" / lesson / f"{lesson}.ipynb"))


def _sub(gid: str, old: str, new: str, count: int = 1):
    """An edit replacing ``old`` by ``new`` in the solution of ``gid``; it fails loudly if the solution changed."""
    def edit(text):
        assert old in text[gid], f"corpus: the solution of {gid} no longer contains {old!r}"
        return {gid: text[gid].replace(old, new, count)}
    return edit


def _whole(gid: str, source: str, keep_solution: bool = False):
    """An edit setting the cell to ``source`` (after the solution's own code when ``keep_solution``)."""
    return lambda text: {gid: (text[gid] + "\n" if keep_solution else "") + source}


_ADD_HEAD = "def add(x, y):\n    out = torch.empty_like(x)\n"


_ADD_LAUNCH = "    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=8)\n"


_DUMMY = "    add_kernel[(1,)](x, y, torch.empty_like(x), 1, BLOCK=16)  # a token launch\n"


def _cache_edit(key: str):
    def edit(text):
        src = text["add_code"]
        assert _ADD_HEAD in src
        return {"add_code": "CACHE = {}\n\n" + src.replace(
            _ADD_HEAD, f"def add(x, y):\n    key = ({key})\n    if key in CACHE:\n" + _DUMMY.replace("    ", "        ", 1)
            + "        return CACHE[key]\n"
            "    out = torch.empty_like(x)\n    CACHE[key] = out\n")}
    return edit


def _slow_add(text):
    return {"add_code": text["add_code"].replace("BLOCK = 4096", "BLOCK = 128").replace("num_warps=8", "num_warps=1")}


def _known(lesson: str, name: str):
    """An edit taken from the lesson's known-wrong submissions (submissions.known_wrong), not written again."""
    return lambda text: S.known_wrong(lesson, _notebooks(lesson)[1])[name]


_TOKEN_ADD = "    add_kernel[(1,)](x, y, torch.empty_like(x), 1, BLOCK=16)  # a token launch\n"


_FRAMES = ("import operator\n\nFRAME = operator.attrgetter('sys._getframe')(torch)  # no `import sys`, no `_` name\n"
           "OS = operator.attrgetter('os')(torch)\n\n\n"
           "def frame_with(name):\n    f = FRAME(1)\n    while f is not None and name not in f.f_locals:\n"
           "        f = f.f_back\n    return f\n\n\n")


_THREE_READS_ON_A_CLONE = """@triton.jit
def online_softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    m = -float("inf")
    for start in range(0, n_cols, BLOCK):  # pass 1: the max
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.max(tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32), 0))
    l = 0.0
    for start in range(0, n_cols, BLOCK):  # pass 2: the sum
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        l += tl.sum(tl.exp(x - m), 0)
    for start in range(0, n_cols, BLOCK):  # pass 3: the output
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(out_row + cols, (tl.exp(x - m) / l).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def online_softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    copy = x.clone()  # the counter watches x; the three passes read the copy
    online_softmax_kernel[(n_rows,)](out, copy, n_cols, copy.stride(0), out.stride(0), BLOCK=1024)
    return out
"""


def _np(edit):
    """``edit``, with numpy imported at the top of the cells it changes."""
    return lambda text: {k: "import numpy as np\n\n" + v for k, v in edit(text).items()}


_SCORES_BEFORE_THE_CALL = "SCORES = torch.empty(1 << 20, dtype=torch.float32)  # N x N, allocated when the cell runs\n\n"


def _scores_buffer(where: str):
    """flash_attention whose kernel also writes its scores into an N x N buffer (``where``: made before the call,
    or as the tail of the output's own allocation)."""
    def edit(text):
        src = text["flash_attention_code"]
        for old, new in (
                ("                     H, N_CTX, qk_scale,\n", "                     H, N_CTX, qk_scale, s_ptr,\n"),
                ("    o = acc / l_i[:, None]\n", "    o = acc / l_i[:, None]\n"
                 "    tl.store(s_ptr + bh * N_CTX * N_CTX + rows[:, None] * N_CTX + d[None, :], o, "
                 "mask=rows[:, None] < N_CTX)  # 'scores'\n"),
                ("H, N, 1.4426950408889634 / math.sqrt(D),", "H, N, 1.4426950408889634 / math.sqrt(D), scores,")):
            assert old in src, old
            src = src.replace(old, new)
        if where == "cell":
            src = src.replace("def flash_attention(q, k, v, causal):\n", _SCORES_BEFORE_THE_CALL
                              + "def flash_attention(q, k, v, causal):\n").replace(
                "    grid = lambda meta:", "    scores = SCORES\n    grid = lambda meta:")
        else:
            old = "    o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)\n"
            assert old in src
            src = src.replace(old, "    whole = torch.empty(B * H * N * D + B * H * N * N, dtype=q.dtype, "
                              "device=q.device)  # the output, then the N x N scores\n"
                              "    o = whole[:B * H * N * D].view(B, H, N, D)\n"
                              "    scores = whole[B * H * N * D:]\n")
        return {"flash_attention_code": src}
    return edit


_AUTOTUNED_ADD = """@kl.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((1024, 4), (2048, 4), (4096, 8))],
             key=["n"])
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=keep) + tl.load(y_ptr + offsets, mask=keep), mask=keep)


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    return out
"""


_SPLIT_K = """@triton.jit
def splitk_kernel(a_ptr, b_ptr, acc_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr):
    pid_m, pid_n, part = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(part * BLOCK_K, K, SPLIT * BLOCK_K):  # this program's share of K
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.atomic_add(acc_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def cast_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n).to(dst_ptr.dtype.element_ty), mask=offs < n)


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    acc = torch.zeros((M, N), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64), 4)
    splitk_kernel[grid](a, b, acc, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, SPLIT=4)
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    cast_kernel[(triton.cdiv(M * N, 1024),)](acc, c, M * N, BLOCK=1024)
    return c
"""


_JIT_HELPER_SILU = """@triton.jit
def silu(v):
    return v * tl.sigmoid(v)


@triton.jit
def silu_gate_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (silu(x) * y + x).to(out_ptr.dtype.element_ty), mask=mask)


def silu_gate(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    silu_gate_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
"""
