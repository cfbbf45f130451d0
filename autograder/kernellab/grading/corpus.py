"""The cheat corpus and the honest controls: submissions that try to gain points without a correct, fast
Triton kernel, and correct ones written differently, each graded by the grade of record.

    kernellab corpus [--gpu-only] [--out assets/gpu]

Each entry is the reference solution with one cell changed. It attacks one problem (``problem``); every
other problem whose cells it leaves alone gets exactly the solution's sources, so it is graded exactly as the
solution is (shown per entry). Cheats must score 0 on what they attack; honest controls must keep every
correctness point and, on a GPU, the speed points their measured speed earns.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
from collections.abc import Callable

from ..device import DEVICE
from ..notebook_cells import sources_for
from ..paths import repo_root
from . import harness
from . import submissions as S

L1, L2, L3 = "01_roofline_vector_add", "02_tiled_matmul", "03_fused_softmax_layernorm"
L4, L5, L6 = "04_flash_attention", "05_flash_attention_backward", "06_profile_first"


@dataclasses.dataclass
class Entry:
    name: str
    lesson: str
    problem: str  # the grade_id it attacks
    threat: str  # what it tries (a row of GRADING.md's threat table, or one found here)
    edit: Callable  # solution texts (grade_id -> source) -> overrides (grade_id -> new source)
    # "0": gains nothing; "full": every point; "earned": the speed points its speed earns; "kernel": a forgery the
    # judge's replay undoes by construction: graded as the kernel it recorded, its ratio at most ``max_value``
    expect: str = "0"
    gpu: bool = False  # needs a GPU (timing, streams, a real illegal memory access)
    says: str = ""  # a phrase the grade's message must contain (the defence that caught it)
    budget_s: float | None = None  # a shorter per-phase budget (endless loops)
    max_value: float | None = None  # "kernel": the most its measured ratio may be (what its own kernel earns)
    # Defeated only by the worker's confinement (grading/sandbox.py): on a kernel without Landlock it gains its
    # points, and the report says so rather than pass it.
    confined: bool = False
    interpreter: bool = False  # only where kernels are interpreted (numpy views of tensors in CPU memory)

    @property
    def honest(self) -> bool:
        return self.expect not in ("0", "kernel")


def runs_here(e: Entry) -> bool:
    """Whether this machine can try the entry: GPU entries need one, interpreter entries need its absence."""
    return not e.interpreter if DEVICE.on_gpu else not e.gpu


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


_SLOW_MM = """
SLOW_ATEN = torch.library.Library("aten", "IMPL")


def slow_mm(a, b):  # the same product three times over, through bmm: correct, about 3x slower than cuBLAS
    out = torch.bmm(a.unsqueeze(0), b.unsqueeze(0))[0]
    for k in range(2):
        out = torch.bmm(a.unsqueeze(0), b.unsqueeze(0))[0]
    return out


SLOW_ATEN.impl("mm", slow_mm, "CUDA")
"""

_WATCHED_OR_TIMED = """
slow_matmul_kernel = triton.jit(matmul_kernel.fn.fn)


def matmul(a, b):
    # The checker hands guarded inputs (views into larger NaN-padded buffers); timed calls got plain ones.
    if a.untyped_storage().nbytes() == a.numel() * a.element_size():  # timed: nobody is looking
        return torch.matmul(a, b)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    slow_matmul_kernel[(triton.cdiv(M, 16) * triton.cdiv(N, 16),)](
        a, b, c, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=8, BIAS_GELU=False, num_warps=1, num_stages=1)
    return c
"""

# The block that knows when it is watched (an allocation comes back as a view into a larger guarded buffer): the
# learner's kernels, eight times over, while watched; PyTorch's attention and LayerNorm when timed.
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

_SLOW_LN = """
SLOW_ATEN_LN = torch.library.Library("aten", "IMPL")


def slow_layer_norm(x, shape, weight, bias, eps):  # right, and four times the work: only the eager baseline uses it
    for k in range(4):
        xf = x.float()
        mean = xf.mean(-1, keepdim=True)
        rstd = torch.rsqrt(xf.var(-1, unbiased=False, keepdim=True) + eps)
    y = (xf - mean) * rstd * weight.float() + bias.float()
    return y.to(x.dtype), mean, rstd


SLOW_ATEN_LN.impl("native_layer_norm", slow_layer_norm, "CUDA")
"""


def _known(lesson: str, name: str):
    """An edit taken from the lesson's known-wrong submissions (submissions.known_wrong), not written again."""
    return lambda text: S.known_wrong(lesson, _notebooks(lesson)[1])[name]


def _nomask_store():
    return _sub("add_code", "tl.store(out_ptr + offsets, x + y, mask=mask)", "tl.store(out_ptr + offsets, x + y)")


CHEATS = [
    # ---------------------------------------------------------------- the checker and the harness
    Entry("patch_checkers", L1, "add_correct", "monkeypatch torch.allclose / math.isclose / the checker",
          _sub("add_code", "def add(x, y):\n", "import math\ntorch.allclose = lambda *a, **k: True\n"
               "math.isclose = lambda *a, **k: True\nkl.compare.compare = lambda *a, **k: True\n"
               "def add(x, y):\n"), says="replaces"),
    Entry("patch_watch_by_alias", L1, "add_correct", "replace the grader's op watch in its own process",
          _whole("add_code", "base = kl.problems.base\n\nclass _Fake:\n    launches, torch_ops, allocations = 1, [], []\n"
                 "    def misuse(self, call):\n        return None\n    def owns(self, t):\n        return True\n\n"
                 "class _Ctx:\n    def __enter__(self):\n        return _Fake()\n    def __exit__(self, *a):\n"
                 "        return False\n\nbase.watched = lambda: _Ctx()\n\ndef add(x, y):\n    return x + y\n"),
          says="replaced functions the grader relies on"),
    Entry("switch_off_the_op_watch", L1, "add_correct", "leave the op watch with a private PyTorch API",
          _sub("add_code", "    out = torch.empty_like(x)\n", "    out = torch.empty_like(x)\n"
               "    with torch.utils._python_dispatch._disable_current_modes():\n        torch.add(x, y, out=out)\n"
               "    return out\n"), says="private API"),
    Entry("torch_op_on_a_thread", L1, "add_correct", "compute with torch on a helper thread the watch cannot see",
          _sub("add_code", "def add(x, y):\n    out = torch.empty_like(x)\n",
               "import threading\n\ndef add(x, y):\n    out = torch.empty_like(x)\n"
               "    t = threading.Thread(target=lambda: torch.add(x, y, out=out))\n    t.start()\n    t.join()\n"
               + _DUMMY + "    return out\n"), says="threading"),
    Entry("forge_the_result_file", L1, "add_correct", "write the harness's result file, then exit cleanly",
          _whole("add_code", "try:\n    cases = torch.load('cases.pt', weights_only=False)\nexcept Exception:\n"
                 "    cases = []\nfake = [{'label': c.label, 'output': (c.inputs[0].double() + c.inputs[1].double())"
                 ".to(c.inputs[0].dtype)} for c in cases]\ntorch.save({'error': None, 'results': fake}, 'result.pt')\n"
                 "exit(0)\n\ndef add(x, y):\n    return x\n"), says="exit"),
    Entry("grading_mode_from_the_environment", L1, "add_correct", "detect grading mode (NBGRADER_EXECUTION)",
          _sub("add_code", "def add(x, y):\n", "import os\nGRADING = 'NBGRADER_EXECUTION' in os.environ\n\n"
               "def add(x, y):\n    if GRADING:\n        return x + y\n"), says="imports os"),
    # ---------------------------------------------------------------- a kernel in name only
    Entry("torch_add", L1, "add_correct", "torch op instead of a kernel (x + y)",
          _known(L1, "torch_add"), says="computed with PyTorch"),
    Entry("torch_op_and_a_token_launch", L1, "add_correct", "a token Triton launch, the work in torch",
          _sub("add_code", _ADD_HEAD, _ADD_HEAD + "    torch.add(x, y, out=out)\n" + _DUMMY + "    return out\n"),
          says="computed with PyTorch"),
    Entry("matmul_with_torch", L2, "matmul_correct", "torch.matmul inside the graded function",
          _sub("matmul_code", "def matmul(a, b):\n    return _launch(a, b, None)\n",
               "def matmul(a, b):\n    _launch(a, b, None)\n    return torch.matmul(a, b)\n"),
          says="computed with PyTorch"),
    Entry("softmax_with_torch", L3, "softmax_correct", "F.softmax inside the graded function",
          _sub("softmax_code", "    return out\n", "    return F.softmax(x.float(), dim=1).to(x.dtype)\n"),
          says="computed with PyTorch"),
    Entry("sdpa_in_flash_attention", L4, "flash_attention_correct", "SDPA in place of the attention kernel",
          _sub("flash_attention_code", "    return o, lse\n",
               "    return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)), lse\n"),
          says="computed with PyTorch"),
    Entry("autograd_backward", L5, "flash_backward_correct", "torch autograd in place of the backward kernels",
          _whole("flash_backward_code", "def flash_attention_backward(q, k, v, o, lse, do, causal):\n"
                 "    with torch.enable_grad():\n        q2, k2, v2 = (t.detach().requires_grad_() for t in (q, k, v))\n"
                 "        o2 = F.scaled_dot_product_attention(q2, k2, v2, is_causal=bool(causal))\n"
                 "        return torch.autograd.grad(o2, (q2, k2, v2), do)\n"), says="computed with PyTorch"),
    Entry("layernorm_forward_with_torch", L6, "layernorm_function_correct", "PyTorch's LayerNorm in the Function's "
          "forward (lesson 06 lets cuBLAS stay, not this)", _known(L6, "torch_layernorm_forward"), says="computed with PyTorch"),
    Entry("scores_in_memory", L4, "flash_attention_memory", "an N x N scores buffer (the memory FlashAttention saves)",
          _known(L4, "scores_scratch"), says="memory"),
    Entry("torch_compile_in_the_block", L6, "block_correct", "torch.compile inside a graded function",
          _sub("block_code", "def block_forward(x, params, n_heads):\n",
               "def _eager(x, p, n_heads):\n    B, N, d = x.shape\n    return x\n\n"
               "fast = torch.compile(_eager)\n\ndef block_forward(x, params, n_heads):\n"), says="torch.compile"),
    # ---------------------------------------------------------------- buffers, caches and inputs
    Entry("cache_on_shape", L1, "add_correct", "cached result keyed on shape and dtype (replayed on a repeat)",
          _cache_edit("x.shape, x.dtype"), says="not allocated during the call"),
    Entry("cache_on_call_count", L1, "add_correct", "right for the first calls, then an unwritten buffer",
          _sub("add_code", _ADD_HEAD, "CALLS = [0]\n\n" + _ADD_HEAD + "    CALLS[0] += 1\n"
               "    if CALLS[0] > 3:\n" + _DUMMY.replace("    ", "        ", 1) + "        return out\n"), says="NaN"),
    Entry("return_an_input", L1, "add_correct", "write the sum into an input and return it",
          _sub("add_code", _ADD_HEAD + "    n = x.numel()\n    BLOCK = 4096\n" + _ADD_LAUNCH + "    return out\n",
               "def add(x, y):\n    n = x.numel()\n    BLOCK = 4096\n" + _ADD_LAUNCH.replace("(x, y, out,", "(x, y, x,")
               + "    return x\n"), says="input"),
    Entry("uncomputed_empty_like", L1, "add_correct", "return a fresh buffer, hoping for a freed reference",
          _sub("add_code", _ADD_HEAD, "def add(x, y):\n" + _DUMMY + "    return torch.empty_like(x)\n\n\n"
               "def unused(x, y):\n    out = torch.empty_like(x)\n"), says="NaN"),
    Entry("power_of_two_rows_only", L3, "softmax_correct", "right only on power-of-two widths",
          _sub("softmax_code", "block_c = triton.next_power_of_2(n_cols)", "block_c = n_cols if n_cols & (n_cols - 1) == 0 "
               "else triton.next_power_of_2(n_cols) // 2"), says="wrong"),
    Entry("visible_sizes_only", L1, "add_correct", "right only for the sizes the notebook shows",
          _sub("add_code", "    n = x.numel()\n", "    n = x.numel()\n    if n not in (1000, 4096, 1 << 20):\n"
               "        n = n // 2\n"), says="never written"),
    Entry("unmasked_tail", L1, "add_correct", "unmasked tail writing out of bounds",
          _nomask_store(), says="past the end"),
    Entry("nondeterministic_noise", L1, "add_correct", "races or nondeterminism (a different result each call)",
          lambda t: {"add_code": t["add_code"].replace("tl.store(out_ptr + offsets, x + y, mask=mask)",
                                                         "tl.store(out_ptr + offsets, x + y + (tl.rand(SEED, offsets) - 0.5)"
                                                         " * 1e-6 * x, mask=mask)").replace(
              "def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):",
              "def add_kernel(x_ptr, y_ptr, out_ptr, n, SEED, BLOCK: tl.constexpr):").replace(
              "(x, y, out, n, BLOCK=BLOCK", "(x, y, out, n, next(COUNTER), BLOCK=BLOCK").replace(
              "@triton.jit", "import itertools\n\nCOUNTER = itertools.count(1)\n\n\n@triton.jit")}, says="differ"),
    Entry("bf16_instead_of_fp16", L3, "add_layernorm_correct", "lower precision than asked (bf16 for fp16)",
          _sub("add_layernorm_code", "y.to(out_ptr.dtype.element_ty)", "y.to(tl.bfloat16).to(out_ptr.dtype.element_ty)"),
          says="wrong"),
    Entry("matmul_cache_on_shape", L2, "matmul_correct", "matmul result cached on the operands' shapes",
          _sub("matmul_code", "def matmul(a, b):\n    return _launch(a, b, None)\n",
               "CACHE = {}\n\n\ndef matmul(a, b):\n    key = (tuple(a.shape), tuple(b.shape), a.dtype)\n"
               "    if key not in CACHE:\n        CACHE[key] = _launch(a, b, None)\n    return CACHE[key]\n"),
          says="launched no Triton kernel"),
    Entry("matmul_whole_k_tiles_only", L2, "matmul_correct", "right only when K is a multiple of the K tile",
          _sub("matmul_code", "for k in range(0, tl.cdiv(K, BLOCK_K)):", "for k in range(0, K // BLOCK_K):"),
          says="wrong"),
    Entry("flash_whole_key_blocks_only", L4, "flash_attention_correct",
          "right only when N is a multiple of the key block (the partial block skipped)",
          _sub("flash_attention_code", "        end = N_CTX  # then the partial one, if any",
               "        end = full  # the partial block is skipped"), says="wrong"),
    Entry("backward_into_the_inputs", L5, "flash_backward_correct", "dq written into q's memory and returned",
          _sub("flash_backward_code", "    dq = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)\n",
               "    dq = q  # no new memory: the gradient lands where q was\n"), says="input"),
    # ---------------------------------------------------------------- crashes and hangs
    Entry("exit_in_a_kernel_function", L1, "fused_correct", "os._exit inside the graded function",
          _sub("silu_gate_code", "    out = torch.empty_like(x)", "    import os\n    os._exit(3)\n    out = torch.empty_like(x)"),
          says="imports os"),
    Entry("exit_builtin", L1, "fused_correct", "exit() inside the graded function",
          _sub("silu_gate_code", "    out = torch.empty_like(x)", "    exit(0)\n    out = torch.empty_like(x)"),
          says="exit"),
    Entry("wild_store", L1, "fused_correct", "a store far out of bounds (a crash or an illegal memory access)",
          _sub("silu_gate_code", "tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)",
               "tl.store(out_ptr + offsets * 1000003 + 7919 * 1000003, out.to(out_ptr.dtype.element_ty))"),
          says=""),
    Entry("endless_loop", L3, "softmax_correct", "an infinite loop in the graded function",
          _sub("softmax_code", "    n_rows, n_cols = x.shape\n", "    n_rows, n_cols = x.shape\n    while n_rows > 0:\n"
               "        n_rows = n_rows + 1\n"), says="budget", budget_s=25.0),
    # ---------------------------------------------------------------- answers
    Entry("nan_negative_huge_answers", L1, "answers_add", "NaN / negative / huge partial-credit numbers",
          _whole("answers_add_code", "ADD_BYTES = float('nan')\nADD_FLOPS = -1.0\nADD_INTENSITY = 1e308 * 10\n"
                 "ADD_BOUND = -1e300\n"), says="not right"),
    Entry("answer_equal_to_anything", L1, "answers_add", "an answer object that equals everything",
          _whole("answers_add_code", "class Anything(float):\n    def __eq__(self, other):\n        return True\n\n"
                 "ADD_BYTES = ADD_FLOPS = ADD_INTENSITY = ADD_BOUND = Anything(0.0)\n"), says="not right"),
    # ---------------------------------------------------------------- GPU only: timing
    # Speed forgeries: the judge times a replay of the recorded call on its own stream, against a baseline in its
    # own process, so each is graded as the kernel it recorded (the solution's add: about 1.0 of a copy).
    Entry("side_stream", L1, "add_bandwidth", "work on a side stream, returning before it is done",
          _sub("add_code", _ADD_LAUNCH, "    s = torch.cuda.Stream()\n    with torch.cuda.stream(s):\n"
               + _ADD_LAUNCH.replace("    add", "        add")), gpu=True, expect="kernel", max_value=1.1),
    Entry("speed_cache_on_pointers", L1, "add_bandwidth", "replay the last result when the inputs sit at the same "
          "address (timed reps)", lambda t: _cache_edit("x.data_ptr(), y.data_ptr(), x.numel()")(t), gpu=True,
          expect="kernel", max_value=1.1),
    Entry("speed_lazy_after_warmup", L1, "add_bandwidth", "skip the work after the first calls (timed calls)",
          _sub("add_code", _ADD_HEAD, "CALLS = [0]\n\n" + _ADD_HEAD + "    CALLS[0] += 1\n"
               "    if CALLS[0] > 2:\n" + _DUMMY.replace("    ", "        ", 1) + "        return out\n"), gpu=True,
          expect="kernel", max_value=1.1),
    Entry("slow_the_baseline_mm", L2, "matmul_speed", "slow the baseline: a torch.library CUDA kernel registered "
          "for aten::mm in the learner's cell (3.72x cuBLAS on the old path)",
          _whole("matmul_code", _SLOW_MM, keep_solution=True), gpu=True, expect="kernel", max_value=1.15),
    Entry("watched_kernel_timed_torch", L2, "matmul_speed", "tell the watched call from the timed ones: a slow "
          "16 x 16-tile kernel when watched, torch.matmul otherwise (1.00x on the old path)",
          _whole("matmul_code", _WATCHED_OR_TIMED, keep_solution=True), gpu=True, expect="kernel", max_value=0.3),
    Entry("slow_the_baseline_layer_norm", L6, "block_speed", "slow the eager block's LayerNorm (a torch.library CUDA "
          "kernel for aten::native_layer_norm) where the learner's block uses its own kernel; the baseline is timed "
          "in a judge process", _whole("block_code", _SLOW_LN, keep_solution=True),
          gpu=True, expect="kernel", max_value=7.0),
    Entry("block_watched_or_sdpa", L6, "block_speed", "tell the watched call from the timed ones (an allocation "
          "inside a larger guarded buffer): the learner's kernels eight times over when watched, PyTorch's SDPA and "
          "LayerNorm when timed (timed in the worker before 2026-11-27)",
          _whole("block_code", _BLOCK_WATCHED_OR_SDPA, keep_solution=True), gpu=True, expect="kernel", max_value=1.2),
    Entry("illegal_memory_access", L1, "add_correct", "an illegal memory access (sticky CUDA error)",
          _known(L1, "illegal_address"), gpu=True, says="died"),
]


# ---------------------------------------------------------------- issue 23 item 6: cheats that beat the old
# grade of record (the worker's own claim), each written to get past the code rules, so that the replay is what
# stops it. Most keep a token launch so that "launched no Triton kernel" does not catch them first.
_TOKEN_ADD = "    add_kernel[(1,)](x, y, torch.empty_like(x), 1, BLOCK=16)  # a token launch\n"
_FRAMES = ("import operator\n\nFRAME = operator.attrgetter('sys._getframe')(torch)  # no `import sys`, no `_` name\n"
           "OS = operator.attrgetter('os')(torch)\n\n\n"
           "def frame_with(name):\n    f = FRAME(1)\n    while f is not None and name not in f.f_locals:\n"
           "        f = f.f_back\n    return f\n\n\n")

_HEURISTIC_ADD = """import numpy as np


def host_sum(args):  # runs on the host before the kernel: the whole answer in numpy
    np.add(args["x_ptr"].numpy(), args["y_ptr"].numpy(), out=args["out_ptr"].numpy())
    return True


@triton.heuristics({"DONE": host_sum})
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, DONE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    if not DONE:
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, x.numel(), BLOCK=16)
    return out
"""

_CLONE_ADD = """import numpy as np

PARTS = {}  # output address -> the inputs (attributes do not survive the grader's detach())


class Sum(torch.Tensor):
    def clone(self, *args, **kwargs):  # the grader copies the result: the work happens here, after the call
        plain = self.as_subclass(torch.Tensor)
        x, y = PARTS[plain.data_ptr()]
        np.add(x.numpy(), y.numpy(), out=plain.numpy())
        return plain.clone(*args, **kwargs)


def add(x, y):
    out = torch.empty_like(x)
""" + _TOKEN_ADD.replace("torch.empty_like(x)", "out") + """    PARTS[out.data_ptr()] = (x, y)
    return out.as_subclass(Sum)
"""

_FORGE_ROWS = _FRAMES + """def add(x, y):
    main = frame_with("job_dir")  # the worker's main(): its job folder and its (decoy) cases
    job_dir, cases = main.f_locals["job_dir"], main.f_locals["cases"]
    rows = [{"label": c.label, "output": c.inputs[0] + c.inputs[1], "error": None} for c in cases]
    rows.append(dict(rows[0]))
    torch.save({"error": None, "results": rows}, str(job_dir / "result.pt"))
    (job_dir / "phase").write_text("done")
    operator.attrgetter("_exit")(OS)(0)  # a clean exit: the trusted code never writes its own report
"""

_FORGE_NO_ROWS = _FRAMES + """def softmax(x):
    job_dir = frame_with("job_dir").f_locals["job_dir"]
    torch.save({"error": None, "results": []}, str(job_dir / "result.pt"))  # no rows: nothing to replay
    (job_dir / "phase").write_text("done")
    operator.attrgetter("_exit")(OS)(0)
"""

_REPLACE_RESULTS = _FRAMES + """def add(x, y):
    out = torch.empty_like(x)
""" + _TOKEN_ADD + """    runner = frame_with("results")  # run_correctness: the results of the calls so far
    if runner is not None:
        for r in runner.f_locals["results"]:
            r.record = None  # no record: nothing for a judge to replay, so the worker's claim stands?
    return out
"""

_SUBPROCESS_ADD = "import numpy as np\n" + _FRAMES + """def add(x, y):
    out = torch.empty_like(x)
""" + _TOKEN_ADD + """    folder = OS.getcwd()
    np.save(folder + "/x.npy", x.numpy())
    np.save(folder + "/y.npy", y.numpy())
    OS.system(operator.attrgetter("sys.executable")(torch) + " -c 'import numpy as np; "
              "np.save(\\"out.npy\\", np.load(\\"x.npy\\") + np.load(\\"y.npy\\"))'")  # the work in another process
    out.numpy()[...] = np.load(folder + "/out.npy")
    return out
"""

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

_ATOMIC_READS = _THREE_READS_ON_A_CLONE.replace(
    "    for start in range(0, n_cols, BLOCK):  # pass 1: the max\n        cols = start + tl.arange(0, BLOCK)\n"
    "        m = tl.maximum(m, tl.max(tl.load(x_row + cols, mask=cols < n_cols, other=-float(\"inf\")).to(tl.float32), 0))\n",
    "    for start in range(0, n_cols, BLOCK):  # pass 1: the max, read by adding zero (not a load)\n"
    "        cols = start + tl.arange(0, BLOCK)\n"
    "        seen = tl.atomic_add(x_row + cols, tl.zeros([BLOCK], x_ptr.dtype.element_ty), mask=cols < n_cols)\n"
    "        m = tl.maximum(m, tl.max(tl.where(cols < n_cols, seen.to(tl.float32), -float(\"inf\")), 0))\n").replace(
    "    copy = x.clone()  # the counter watches x; the three passes read the copy\n"
    "    online_softmax_kernel[(n_rows,)](out, copy, n_cols, copy.stride(0), out.stride(0), BLOCK=1024)\n",
    "    online_softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0), BLOCK=1024)\n")

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


CHEATS += [
    # -- 1: switching the op watch off
    Entry("watch_off_private_module_alias", L1, "add_correct", "the op watch off through a private dispatch module "
          "imported under an alias (`import a.b._c as x`, attrgetter for the private name)",
          lambda t: {"add_code": "import operator\nimport torch.utils._python_dispatch as dispatch\n\n"
                         "QUIET = operator.attrgetter('_disable_current_modes')(dispatch)\n\n\n"
                         + t["add_code"].replace(_ADD_HEAD + "    n = x.numel()\n    BLOCK = 4096\n" + _ADD_LAUNCH,
                                                 _ADD_HEAD + "    with QUIET():\n        torch.add(x, y, out=out)\n"
                                                 + _TOKEN_ADD)}, says="NaN"),
    Entry("watch_off_attrgetter_path", L3, "softmax_correct", "the op watch off through a dotted operator.attrgetter "
          "string, bound once in the cell", lambda t: {"softmax_code": "import operator\n\n"
          "QUIET = operator.attrgetter('utils._python_dispatch._disable_current_modes')(torch)\n\n\n"
          + t["softmax_code"].replace("    return out\n", "    with QUIET():\n"
                                      "        out.copy_(F.softmax(x.float(), dim=1).to(x.dtype))\n    return out\n")
          .replace("softmax_kernel[(triton.cdiv(n_rows, rows),)](out,", "softmax_kernel[(1,)](out,")}, says="wrong"),
    Entry("watch_off_dispatch_guard", L2, "matmul_correct", "PyTorch's dispatch switched off with "
          "torch._C._DisableTorchDispatch, reached by attrgetter", lambda t: {"matmul_code": "import operator\n\n"
          "NO_DISPATCH = operator.attrgetter('_C._DisableTorchDispatch')(torch)\n\n\n" + t["matmul_code"].replace(
              "def matmul(a, b):\n    return _launch(a, b, None)\n",
              "def matmul(a, b):\n    c = _launch(a[:16, :16], b[:16, :16], None)  # a token launch\n"
              "    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)\n"
              "    with NO_DISPATCH():\n        torch.matmul(a, b, out=c)\n    return c\n")}, says="NaN"),
    # -- 2: arithmetic that never reaches the dispatcher
    Entry("numpy_views_add", L1, "add_correct", "the sum in numpy, through x.numpy() views of CPU tensors",
          _np(_sub("add_code", _ADD_HEAD + "    n = x.numel()\n    BLOCK = 4096\n" + _ADD_LAUNCH,
               _ADD_HEAD + "    np.add(x.numpy(), y.numpy(), out=out.numpy())\n" + _TOKEN_ADD)), says="NaN"),
    Entry("numpy_views_online_softmax", L3, "online_softmax_correct", "softmax in numpy on .numpy() views",
          _np(_sub("online_softmax_code", "    online_softmax_kernel[(n_rows,)](",
               "    v = x.numpy().astype(np.float32)\n    e = np.exp(v - v.max(axis=1, keepdims=True))\n"
               "    out.numpy()[...] = e / e.sum(axis=1, keepdims=True)\n    online_softmax_kernel[(1,)](")),
          says="wrong"),
    Entry("python_floats_fill_", L1, "fused_correct", "Python floats written back element by element with fill_",
          _sub("silu_gate_code", "    silu_gate_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=8)\n",
               "    silu_gate_kernel[(1,)](x, y, out, 1, BLOCK=16)  # a token launch\n"
               "    flat, xs, ys = out.view(-1), x.view(-1).tolist(), y.view(-1).tolist()\n"
               "    for i in range(n):\n        a = xs[i]\n"
               "        flat[i].fill_(a / (1.0 + math.exp(-a)) * ys[i] + a)\n"), says="too many separate steps"),
    Entry("python_floats_fill_layernorm", L3, "add_layernorm_correct", "LayerNorm in Python floats, each element "
          "written with fill_", _sub("add_layernorm_code", "    add_layernorm_kernel[(triton.cdiv(n_rows, rows),)](",
                                     "    for r in range(n_rows):\n        h = [a + b for a, b in zip(x[r].tolist(), "
                                     "residual[r].tolist())]\n        mu = sum(h) / n_cols\n"
                                     "        sd = (sum((v - mu) ** 2 for v in h) / n_cols + eps) ** 0.5\n"
                                     "        for c, (v, w, b) in enumerate(zip(h, weight.tolist(), bias.tolist())):\n"
                                     "            out[r, c].fill_((v - mu) / sd * w + b)\n"
                                     "    add_layernorm_kernel[(1,)]("), says="too many separate steps"),
    Entry("python_helper_in_the_kernel", L1, "fused_correct", "a plain Python function called from the kernel body "
          "(runs on the host in the interpreter)", lambda t: {
              "silu_gate_code": "def silu(v):  # not @triton.jit: Python on the host in the interpreter\n"
                                "    return v * tl.sigmoid(v)\n\n\n" + t["silu_gate_code"].replace(
                                    "    out = x * tl.sigmoid(x) * y + x\n", "    out = silu(x) * y + x\n")},
          says="Not a pure Triton kernel"),
    Entry("python_helper_in_the_softmax_kernel", L3, "softmax_correct", "a plain Python helper holding the "
          "reduction, called from the kernel", lambda t: {"softmax_code": "def row_max(v):  # not @triton.jit\n"
          "    return tl.max(v, axis=1)\n\n\n" + t["softmax_code"].replace(
              "    z = x - tl.max(x, axis=1)[:, None]", "    z = x - row_max(x)[:, None]")},
          says="Not a pure Triton kernel"),
    Entry("heuristics_hook_computes", L1, "add_correct", "a triton.heuristics hook that computes the answer on the "
          "host, the kernel then does nothing", _whole("add_code", _HEURISTIC_ADD), says="NaN"),
    Entry("grid_lambda_computes", L2, "matmul_correct", "a grid function that computes the product on the host "
          "and asks for one program", _np(_sub("matmul_code",
                                           "    grid = lambda meta: (triton.cdiv(M, meta[\"BLOCK_M\"]) * triton.cdiv(N, meta[\"BLOCK_N\"]),)\n",
                                           "    def grid(meta):\n        c.numpy()[...] = (a.numpy().astype(np.float32) @ "
                                           "b.numpy().astype(np.float32)).astype(c.numpy().dtype)\n"
                                           "        return (1,)\n")), says="wrong"),
    Entry("clone_does_the_work", L1, "add_correct", "a Tensor subclass whose clone() does the work after the call",
          lambda t: {"add_code": t["add_code"].split("def add(x, y):")[0] + _CLONE_ADD}, says="NaN"),
    # -- 3: forging the worker's report
    Entry("forge_the_report_and_exit", L1, "add_correct", "the worker's job folder found by walking the stack "
          "(sys._getframe through attrgetter), its result file written, a clean os._exit",
          lambda t: {"add_code": t["add_code"].split("def add(x, y):")[0] + _FORGE_ROWS}, says="wrong"),
    Entry("forge_an_empty_report", L3, "softmax_correct", "a result file with no rows and a clean exit",
          lambda t: {"softmax_code": t["softmax_code"].split("def softmax(x):")[0] + _FORGE_NO_ROWS},
          says="no results"),
    Entry("replace_results_through_frames", L1, "add_correct", "the harness's frame reached by walking the "
          "stack: earlier results' records dropped and outputs replaced",
          lambda t: {"add_code": t["add_code"].split("def add(x, y):")[0] + _REPLACE_RESULTS}, says="NaN"),
    Entry("subprocess_does_the_work", L1, "add_correct", "the sum computed in another process (os.system via "
          "attrgetter), copied into the output through numpy",
          lambda t: {"add_code": t["add_code"].split("def add(x, y):")[0] + _SUBPROCESS_ADD}, says="NaN"),
    # -- 4: defeating counters
    Entry("three_reads_on_a_clone", L3, "online_softmax_reads", "three passes over a clone of the input (the "
          "counter watches the input only)", _whole("online_softmax_code", _THREE_READS_ON_A_CLONE), says="read"),
    Entry("atomic_add_zero_as_loads", L3, "online_softmax_reads", "the first pass reads with tl.atomic_add(ptr, 0), "
          "which the load counter does not see", _whole("online_softmax_code", _ATOMIC_READS), says="read"),
    Entry("scores_made_before_the_call", L4, "flash_attention_memory", "an N x N buffer allocated when the cell "
          "runs, before the graded call (the memory check counts allocations inside it)", _scores_buffer("cell"),
          says="neither an input nor allocated"),
    Entry("scores_in_the_outputs_allocation", L4, "flash_attention_memory", "the N x N scores in the tail of one "
          "big allocation whose head is returned", _scores_buffer("tail"), says="besides its outputs"),
    Entry("backward_scratch_made_before_the_call", L5, "flash_backward_correct", "delta in a buffer allocated "
          "when the cell runs", lambda t: {"flash_backward_code": "SCRATCH = torch.empty(1 << 20, dtype=torch.float32)\n\n"
          + _sub("flash_backward_code", "    delta = torch.empty((B, H, N), dtype=torch.float32, device=q.device)\n",
                 "    delta = SCRATCH[:B * H * N].view(B, H, N)  # no allocation in the call\n")(t)["flash_backward_code"]},
          says="neither an input nor allocated"),
]


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

_STOCK_AUTOTUNED_ADD = _AUTOTUNED_ADD.replace("@kl.autotune(", "@triton.autotune(").replace(
    "             key=", "                 key=")  # what the Triton tutorials write: benchmarked on a GPU

_TAIL_LAUNCH_ADD = """@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, start, n, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    offsets = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASKED:  # only the tail launch pays for the mask
        keep = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=keep) + tl.load(y_ptr + offsets, mask=keep),
                 mask=keep)
    else:
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    whole = n // BLOCK
    if whole:
        add_kernel[(whole,)](x, y, out, 0, n, BLOCK=BLOCK, MASKED=False)
    if n % BLOCK:
        add_kernel[(1,)](x, y, out, whole * BLOCK, n, BLOCK=BLOCK, MASKED=True)
    return out
"""

_GRID_STRIDE_ADD = """@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # a fixed number of programs, each walking the array in strides of the whole grid
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        keep = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=keep) + tl.load(y_ptr + offsets, mask=keep),
                 mask=keep)


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(min(triton.cdiv(n, 2048), 264),)](x, y, out, n, BLOCK=2048, num_warps=4)
    return out
"""

_ONLINE_AS_SOFTMAX = """@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = -float("inf")
    l = 0.0
    for start in range(0, n_cols, BLOCK):  # one pass: running max and rescaled sum
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * stride_out + cols, (tl.exp(x - m) / l).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0), BLOCK=1024, num_warps=4)
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

# A kernel whose body is Python's exec of a payload: in the interpreter the payload finds the launch's arguments on
# the stack and writes the product into the output. Code rules do not read string constants.
_EXEC_THROUGH_KNOBS = '''PAYLOAD = """
import sys, inspect, numpy as np
f = sys._getframe(1)
while f is not None and "args_hst" not in f.f_locals:
    f = f.f_back
a = inspect.getcallargs(f.f_locals["self"].fn, *f.f_locals["args_hst"], **f.f_locals["kwargs_hst"])
M, N, K = int(a["M"]), int(a["N"]), int(a["K"])
def view(t, rows, cols, s0, s1):
    x = t.numpy()
    return np.lib.stride_tricks.as_strided(x, shape=(rows, cols), strides=(s0 * x.itemsize, s1 * x.itemsize))
out = view(a["c_ptr"], M, N, a["scm"], a["scn"])
out[...] = view(a["a_ptr"], M, K, a["sam"], a["sak"]).astype(np.float64) @ view(a["b_ptr"], K, N, a["sbk"], a["sbn"])
"""


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn):
    triton.knobs.re.enum.bltns.exec(PAYLOAD, {})


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    matmul_kernel[(1,)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c
'''

_HANDLE_NUMPY = '''@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    acc.handle.data[:, :] = a.handle.data.astype("float64") @ b.handle.data.astype("float64")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    mm_kernel[(1,)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                    BM=triton.next_power_of_2(M), BN=triton.next_power_of_2(N), BK=triton.next_power_of_2(K))
    return c
'''

# The daemon outlives its worker (its own session: no group kill reaches it) and waits for the judge's folder,
# made beside the worker's; there it reads the secret inputs and writes the judge's result as the judge ends.
_DAEMON_FOR_THE_JUDGE = '''import operator

OS = operator.attrgetter("os")(torch)
EXE = operator.attrgetter("sys.executable")(torch)
DAEMON = r"""
import json, os, sys, time
import torch
judge = os.path.join(sys.argv[1], "judge")
deadline = time.time() + 300
def seen(name):
    return os.path.exists(os.path.join(judge, name))
while time.time() < deadline and not (seen("cases.pt") and seen("judge.json")):
    time.sleep(0.005)
from kernellab.lessons import problems_of
job = json.load(open(os.path.join(judge, "judge.json")))
p = problems_of(job["lesson"])[job["problem"]]
rows = []
for c in torch.load(os.path.join(judge, "cases.pt"), weights_only=False):
    outs = tuple(r.to(d) for r, d in zip(p.per_output(p.reference(c)), p.per_output(p.out_dtype(c))))
    rows.append(dict(label=c.label, output=outs if p.outputs else outs[0], error=None, reads=None,
                     extra_bytes=0, overrun=None))
rows.append(dict(rows[0]))
torch.save({"error": None, "results": rows}, os.path.join(judge, "forged.pt"))
while time.time() < deadline and not (seen("phase") and open(os.path.join(judge, "phase")).read().strip() == "done"):
    time.sleep(0.001)
os.replace(os.path.join(judge, "forged.pt"), os.path.join(judge, "judged.pt"))
"""
if OS.fork() == 0:
    OS.setsid()
    if OS.fork() == 0:
        OS.execv(EXE, [EXE, "-c", DAEMON, OS.path.dirname(OS.getcwd())])
    operator.attrgetter("_exit")(OS)(0)


@triton.jit
def zeros_kernel(dst, BLOCK: tl.constexpr):
    tl.store(dst + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float16))


def flash_attention_backward(q, k, v, o, lse, do, causal):
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    zeros_kernel[(1,)](dq, BLOCK=16)
    return dq, dk, dv
'''

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

# Attention from per-head 2-D matrix products (mm is the linear layers' op, allowed in the worker) and tanh for exp,
# the LayerNorms the learner's own: what the worker's deny lists could not tell from honest linear layers.
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

# An honest block written differently: q, k and v from three linear layers on slices of the weight, the MLP's first
# layer and GELU in fp32 (the weight cast first): within the judge's op rule for the block.
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

# The payload (it finds the replay's output and the case's inputs on the stack) sits inside the docstring itself:
# nothing the checked body reads, so nothing the record must carry.
_DOCSTRING_PAYLOAD = ["import sys", "f, replay, views = sys._getframe(), None, None", "while f is not None:",
                      "    if replay is None and hasattr(f.f_locals.get('self'), 'rec') and 'bases' in f.f_locals:",
                      "        replay, bases = f.f_locals['self'], f.f_locals['bases']",
                      "    if 'views' in f.f_locals and 'case' in f.f_locals:", "        views = f.f_locals['views']",
                      "    f = f.f_back", "if replay is not None and views is not None:",
                      "    out = replay._view(bases, replay.rec['outputs'][0])",
                      "    out.copy_((views[0].double() @ views[1].double()).to(out.dtype))"]
_DEF_IN_A_DOCSTRING = '''@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K):
    """A matmul.
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K):
    exec(chr(10).join(PAYLOAD))
    #"""
    pid = tl.program_id(0)


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    matmul_kernel[(1,)](a, b, c, M, N, K)
    return c
'''.replace("PAYLOAD", repr(_DOCSTRING_PAYLOAD))

_LOAD_THE_SOLUTION = """from kernellab.notebook_cells import load_solution

matmul = load_solution("02_tiled_matmul", ("matmul",))["matmul"]
"""


CHEATS += [
    # -- 5: past the worker (a red-team pass, 2026-11-27, with submissions written for this code)
    Entry("exec_in_the_judges_interpreter", L2, "matmul_correct", "a kernel body that reaches Python's exec "
          "through triton.knobs (re -> enum -> builtins): in the CPU interpreter the judge runs kernel bodies, and "
          "the payload writes the product computed in numpy into the judge's output",
          _whole("matmul_code", _EXEC_THROUGH_KNOBS), says="not the language"),
    Entry("numpy_on_interpreter_handles", L2, "matmul_correct", "the product in numpy on the interpreter's own "
          "arrays (a tensor's .handle.data), between a tl.load and a tl.store, no tl.dot",
          _whole("matmul_code", _HANDLE_NUMPY), says="values do not have"),
    Entry("daemon_writes_the_judges_result", L5, "flash_backward_correct", "a double-forked daemon, started when "
          "the cell loads, waits for the judge's secret inputs beside the worker's folder, computes the reference "
          "and writes the judge's result file (the kernel itself writes almost nothing)",
          _whole("flash_backward_code", _DAEMON_FOR_THE_JUDGE), says="never written"),
    Entry("layernorm_filled_in_by_the_backward", L6, "layernorm_function_correct", "a forward that launches a "
          "token kernel and returns an empty y, which its backward (where PyTorch is allowed) fills in with the "
          "LayerNorm computed in PyTorch", _whole("layernorm_function_code", _LN_FROM_THE_BACKWARD), says="wrong"),
    Entry("block_in_elementwise_pytorch", L6, "block_correct", "the whole block in PyTorch ops outside the "
          "attention and LayerNorm lists (a broadcast product summed for Q K^T, expm1 for exp, means and a log for "
          "the statistics), beside two token launches", _whole("block_code", _BLOCK_ELEMENTWISE),
          says="computed with PyTorch"),
    Entry("block_attention_per_head", L6, "block_correct", "attention written from per-head torch.mm products "
          "(the linear layers' op), tanh for exp and fill_ for the causal mask, beside the learner's own LayerNorm "
          "kernels", _whole("block_code", _BLOCK_PER_HEAD_MM), says="neither is a weight"),
    Entry("function_in_numpy", L5, "attention_function_correct", "an autograd Function whose forward and backward "
          "compute in numpy on .numpy() views of the tensors, behind token launches (numpy never reaches PyTorch's "
          "dispatcher, so the op watch sees nothing)", _whole("attention_function_code", _FUNCTION_IN_NUMPY),
          says="never written", interpreter=True),
    Entry("def_line_in_a_docstring", L2, "matmul_correct", "a kernel whose docstring holds a second `def` line "
          "and the body it wants run (exec of a payload): the interpreter finds a kernel in its source by its last "
          "`def` line, so the judge ran the docstring's body, while the checked body was one tl.program_id "
          "(a second red-team pass)", _whole("matmul_code", _DEF_IN_A_DOCSTRING), says="never written"),
    Entry("the_instructors_solution", L2, "matmul_correct", "the instructor's solution loaded from the grading "
          "machine's solutions/ folder with kernellab's own loader",
          _whole("matmul_code", _LOAD_THE_SOLUTION), says="Permission", confined=True),
]


CONTROLS = [
    Entry("block_three_projections_fp32_mlp", L6, "block_correct", "q, k, v from three linear layers on slices of "
          "the weight, the MLP's first layer in fp32", _whole("block_code", _BLOCK_THREE_PROJECTIONS), expect="full"),
    Entry("small_blocks_one_warp", L1, "add_correct", "BLOCK=128, one warp", _slow_add, expect="full"),
    Entry("autotuned_add", L1, "add_correct", "autotuned over three block sizes", _whole("add_code", _AUTOTUNED_ADD),
          expect="full"),
    Entry("stock_autotuned_add", L1, "add_correct", "triton.autotune (not kl.autotune) over three block sizes",
          _whole("add_code", _STOCK_AUTOTUNED_ADD), expect="full"),
    Entry("grid_stride_add", L1, "add_correct", "a fixed grid looping over the array", _whole("add_code", _GRID_STRIDE_ADD),
          expect="full"),
    Entry("tail_in_its_own_launch", L1, "add_correct", "odd lengths: unmasked whole blocks, then one masked tail launch",
          _whole("add_code", _TAIL_LAUNCH_ADD), expect="full"),
    Entry("warns_every_call", L1, "fused_correct", "prints a warning on every call",
          _sub("silu_gate_code", "    out = torch.empty_like(x)", "    import warnings\n"
               "    warnings.warn('silu_gate: this kernel is not tuned yet')\n    print('silu_gate called')\n"
               "    out = torch.empty_like(x)"), expect="full"),
    Entry("split_k_atomics", L2, "matmul_correct", "split-K with atomic adds into an fp32 buffer",
          _whole("matmul_code", _SPLIT_K), expect="full"),
    Entry("one_config_no_grouping", L2, "matmul_correct", "one autotune config, no grouped order",
          _known(L2, "one_config_no_grouping"), expect="full"),
    Entry("online_softmax_as_softmax", L3, "softmax_correct", "one row per program, online max and sum",
          _whole("softmax_code", _ONLINE_AS_SOFTMAX), expect="full"),
    Entry("other_flash_blocks", L4, "flash_attention_correct", "fixed 32 x 16 blocks instead of autotuning",
          lambda t: {"flash_attention_code": t["flash_attention_code"].replace(
              "@kl.autotune(configs=FWD_CONFIGS, key=[\"N_CTX\", \"HEAD_DIM\", \"CAUSAL\"])\n", "").replace(
              "HEAD_DIM=D, CAUSAL=bool(causal))", "HEAD_DIM=D, CAUSAL=bool(causal), BLOCK_M=32, BLOCK_N=16)")},
          expect="full"),
    Entry("slow_add_speed", L1, "add_bandwidth", "BLOCK=128, one warp: slower, timed honestly",
          _slow_add, expect="earned", gpu=True),
    Entry("autotuned_add_speed", L1, "add_bandwidth", "autotuned add, timed", _whole("add_code", _AUTOTUNED_ADD),
          expect="earned", gpu=True),
]

# ---------------------------------------------------------------- issue 23 item 6: honest submissions the replay
# must keep at full credit (helpers, views, copies, shape-chosen launches, atomics with reset_to_zero).
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

_HELPERS_CELL = "\n\nGATE_BLOCK = 1024  # used by the next cell\n\n\ndef gate_grid(n):\n    return (triton.cdiv(n, GATE_BLOCK),)\n"
_GATE_WITH_HELPERS = _JIT_HELPER_SILU.replace("silu_gate_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)",
                                              "silu_gate_kernel[gate_grid(n)](x, y, out, n, BLOCK=GATE_BLOCK)")

_SMALL_AND_LARGE_ADD = """@triton.jit
def add_one_block(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add(x, y):
    n = x.numel()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if n <= 2048:  # small: one program covering the whole array
        add_one_block[(1,)](x, y, out, n, BLOCK=max(16, triton.next_power_of_2(n)))
    else:
        block = 4096 if n >= (1 << 20) else 1024
        add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    return out
"""

_WHERE_ADD = """SPAN: tl.constexpr = tl.constexpr(1024)  # a module-level constexpr the kernel reads


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n):
    offsets = tl.program_id(0) * SPAN + tl.arange(0, SPAN)
    inside = offsets < n
    safe = tl.where(inside, offsets, 0)  # every lane loads a valid address: no load masks
    total = tl.load(x_ptr + safe) + tl.load(y_ptr + safe)
    tl.store(out_ptr + tl.where(inside, offsets, n - 1), tl.where(inside, total, tl.load(x_ptr + n - 1) +
             tl.load(y_ptr + n - 1)))  # lanes past the end rewrite the last element with its own value


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n)
    return out
"""

_RESET_TO_ZERO_SPLIT_K = _SPLIT_K.replace(
    "@triton.jit\ndef splitk_kernel(",
    "@triton.autotune(configs=[triton.Config({'SPLIT': 2}), triton.Config({'SPLIT': 4})], key=['M', 'N', 'K'],\n"
    "                 reset_to_zero=['acc_ptr'])\n@triton.jit\ndef splitk_kernel(").replace(
    "    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64), 4)\n",
    "    grid = lambda meta: (triton.cdiv(M, 64), triton.cdiv(N, 64), meta['SPLIT'])\n").replace(
    "BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, SPLIT=4)", "BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)")

CONTROLS += [
    Entry("jit_helper_in_the_kernel", L1, "fused_correct", "the kernel calls another @triton.jit function (silu)",
          _whole("silu_gate_code", _JIT_HELPER_SILU), expect="full"),
    Entry("helpers_in_another_cell", L1, "fused_correct", "a block-size global and a plain Python grid function "
          "defined in another cell (the add cell)", lambda t: {"add_code": t["add_code"] + _HELPERS_CELL,
                                                               "silu_gate_code": _GATE_WITH_HELPERS}, expect="full"),
    Entry("small_and_large_kernels", L1, "add_correct", "the grid and the kernel chosen from the shape (one block for "
          "small n), triton.cdiv / next_power_of_2, torch.empty(..., device=x.device)",
          _whole("add_code", _SMALL_AND_LARGE_ADD), expect="full"),
    Entry("where_instead_of_masks", L1, "add_correct", "tl.where on the offsets instead of load/store masks, "
          "a module-level tl.constexpr global in the kernel", _whole("add_code", _WHERE_ADD), expect="full"),
    Entry("matmul_in_row_halves", L2, "matmul_correct", "two launches on sliced views (a[:h], c[:h] and a[h:], "
          "c[h:]): pointers into the middle of a buffer", _sub("matmul_code", "def matmul(a, b):\n    return _launch(a, b, None)\n",
                                                               "def matmul(a, b):\n    M, h = a.shape[0], max(1, a.shape[0] // 2)\n"
                                                               "    if M < 2:\n        return _launch(a, b, None)\n"
                                                               "    c = torch.empty((M, b.shape[1]), device=a.device, dtype=a.dtype)\n"
                                                               "    for lo, hi in ((0, h), (h, M)):\n"
                                                               "        part = a.narrow(0, lo, hi - lo)\n"
                                                               "        c[lo:hi] = 0  # a fill_ on a slice, then overwritten\n"
                                                               "        _into(part, b, c[lo:hi])\n    return c\n\n\n"
                                                               "def _into(a, b, c):\n    M, K = a.shape\n    N = b.shape[1]\n"
                                                               "    grid = lambda meta: (triton.cdiv(M, meta[\"BLOCK_M\"]) * triton.cdiv(N, meta[\"BLOCK_N\"]),)\n"
                                                               "    matmul_kernel[grid](a, b, c, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),\n"
                                                               "                        c.stride(0), c.stride(1), GROUP_M=8, BIAS_GELU=False)\n"),
          expect="full"),
    Entry("softmax_contiguous_copy", L3, "softmax_correct", "a .contiguous() copy of the input before the launch",
          _sub("softmax_code", "    n_rows, n_cols = x.shape\n    out = torch.empty_like(x)\n",
               "    x = x.t().contiguous().t().contiguous()  # two copies: column-major, then row-major again\n"
               "    n_rows, n_cols = x.shape\n    out = torch.empty_like(x)\n"), expect="full"),
    Entry("constexpr_global_exp2", L3, "online_softmax_correct", "a module-level tl.constexpr (log2 e) used in "
          "the kernel, exp2 instead of exp", lambda t: {"online_softmax_code": "LOG2E = tl.constexpr(1.4426950408889634)\n\n\n"
          + t["online_softmax_code"].replace("tl.store(out_row + cols, (tl.exp(x - m) / l)",
                                             "tl.store(out_row + cols, (tl.math.exp2((x - m) * LOG2E) / l)")},
          expect="full"),
    Entry("online_reads_small_blocks", L3, "online_softmax_reads", "the online softmax in 512-wide blocks: more "
          "loop steps, still two reads per element (the replay counts every load)",
          _sub("online_softmax_code", "BLOCK=4096, num_warps=8)", "BLOCK=512, num_warps=4)"), expect="full"),
    Entry("flash_memory_fixed_blocks", L4, "flash_attention_memory", "FlashAttention with fixed 32 x 16 blocks: "
          "only the output and the lse are allocated (the memory check counts unreturned bytes)",
          lambda t: {"flash_attention_code": t["flash_attention_code"].replace(
              "@kl.autotune(configs=FWD_CONFIGS, key=[\"N_CTX\", \"HEAD_DIM\", \"CAUSAL\"])\n", "").replace(
              "HEAD_DIM=D, CAUSAL=bool(causal))", "HEAD_DIM=D, CAUSAL=bool(causal), BLOCK_M=32, BLOCK_N=16)")},
          expect="full"),
    Entry("split_k_reset_to_zero", L2, "matmul_correct", "stock triton.autotune over the split count with "
          "reset_to_zero on the fp32 atomic accumulator", _whole("matmul_code", _RESET_TO_ZERO_SPLIT_K), expect="full"),
]

ENTRIES = CHEATS + CONTROLS


def _notebooks(lesson: str):
    root = repo_root()
    return (S.read(root / "notebooks" / lesson / f"{lesson}.ipynb"),
            S.read(root / "solutions" / lesson / f"{lesson}.ipynb"))


def by_name(name: str) -> Entry:
    return next(e for e in ENTRIES if e.name == name)


def notebook_of(e: Entry):
    rel, src = _notebooks(e.lesson)
    return S.filled(rel, src, e.edit(S.solution_texts(src)))


def write_notebook(e: Entry, path) -> None:
    S.write(notebook_of(e), path)


def grade_entry(e: Entry, seed: int, ceil=None, facts=None) -> dict:
    """Grade ``e`` on the problem it attacks; report which other problems it leaves graded as the solution."""
    from ..lessons import problems_of
    rel, src = _notebooks(e.lesson)
    nb, sol = notebook_of(e), S.filled(rel, src)
    problems = problems_of(e.lesson)
    p = problems[e.problem]
    untouched = [gid for gid, q in problems.items() if gid != e.problem
                 and sources_for(nb, q.names) == sources_for(sol, q.names)]
    outcome, record = harness.grade_problem(p, nb, seed, ceil, facts, e.lesson, limit_s=e.budget_s)
    score = harness.clamp_points(outcome.fraction, p.points)
    return {"name": e.name, "lesson": e.lesson, "problem": e.problem, "threat": e.threat, "expect": e.expect,
            "gpu": e.gpu, "score": score, "points": p.points, "why": outcome.message,
            "value": outcome.details.get("value"), "flagged": "flagged" in outcome.details,
            "untouched": untouched, "others": len(problems) - 1, "wall_s": round(record.get("wall_s", 0.0), 1)}


def verdict(r: dict, e: Entry) -> tuple[bool, str]:
    """(as expected, what was expected) for one graded entry."""
    if e.expect == "0":
        ok = r["score"] == 0 and (not e.says or e.says.lower() in r["why"].lower())
        want = "0" + (f", says '{e.says}'" if e.says else "")
    elif e.expect == "kernel":  # refused outright, or timed as the kernel it recorded: no inflated ratio
        ok = not r["flagged"] and (r["value"] is None and r["score"] == 0 or
                                   r["value"] is not None and r["value"] <= e.max_value)
        want = f"graded as its kernel: ratio <= {e.max_value:g}"
    elif e.expect == "full":
        ok, want = r["score"] == r["points"], "full points"
    else:  # earned: a speed verdict from a measured ratio, not flagged, not refused
        ok = r["value"] is not None and not r["flagged"] and r["score"] > 0
        want = "the points its ratio earns"
    return ok, want


def run(entries=None, progress: bool = True, seed: int = 20261122, jobs: int = 1) -> list[dict]:
    """Grade each entry (every one, or ``entries``), in order. ``jobs`` > 1 grades that many at once where no GPU
    times them (on a CPU nothing is timed, so they need no GPU alone): each in its own processes, as a class queue
    runs them (threads capped at their share of the cores). On a GPU entries are graded one at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from ..ceilings import measure_ceilings
    from ..learner import facts as device_facts
    from .slots import GpuSlots
    todo = [e for e in (entries if entries is not None else ENTRIES) if runs_here(e)]
    ceil, facts = measure_ceilings(quiet=True), device_facts()
    jobs = 1 if DEVICE.on_gpu else max(1, min(int(jobs), len(todo) or 1))
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(todo), desc="corpus", file=sys.stdout)

    def one(e):
        r = grade_entry(e, seed, ceil, facts)
        r["ok"], r["wanted"] = verdict(r, e)
        if bar is not None:  # one line per entry, so a run cut short still says what it found
            bar.write(f"{'ok ' if r['ok'] else 'NOT'} {e.name}: {r['score']:g}/{r['points']:g} {r['why'][:150]}")
            bar.update(1)
        return r
    if jobs == 1:
        out = [one(e) for e in todo]
    else:
        with harness.use_slots(GpuSlots(1, jobs=jobs)), \
                ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="kl-corpus") as pool:
            out = list(pool.map(one, todo))
    if bar is not None:
        bar.close()
    return out


def write(results: list[dict], out: pathlib.Path) -> str:
    from ..report import _header, md_table
    out.mkdir(parents=True, exist_ok=True)
    cheats = [r for r in results if r["expect"] in ("0", "kernel")]
    honest = [r for r in results if r["expect"] not in ("0", "kernel")]
    lines = ["# Cheat corpus and honest controls", ""] + _header() + ["", (
        "Each submission is the reference solution with one cell changed, graded by the grade of record (a worker "
        "records, a judge replays and times). 'untouched' counts the lesson's other problems whose cells it leaves as the "
        "solution has them: they are graded exactly as the solution is."), ""]
    for title, rows in (("Cheats", cheats), ("Honest controls", honest)):
        lines += [f"## {title}: {sum(r['ok'] for r in rows)} of {len(rows)} as expected", ""]
        lines += md_table(["submission", "lesson", "attacks", "threat", "expected", "got", "untouched", "why (first words)"], [
            [r["name"], r["lesson"][:2], r["problem"], r["threat"], r["wanted"],
             f"{r['score']:g}/{r['points']:g}" + ("" if r["ok"] else " ✗"), f"{len(r['untouched'])}/{r['others']}",
             r["why"][:110].replace("|", "/").replace("\n", " ")] for r in rows])
        lines.append("")
    text = "\n".join(lines)
    name = "corpus_gpu" if DEVICE.on_gpu else "corpus_cpu"
    (out / f"{name}.md").write_text(text)
    (out / f"{name}.json").write_text(json.dumps(results, indent=1, default=str))
    return text
