"""Lesson 06: profile first. A GPT-1-style transformer block (causal attention, MLP, post-norm) in plain
PyTorch is profiled, its ops placed on the device's roofline, and the learner's kernels from lessons
03-05 swapped in where the profile says they pay: attention (FlashAttention) and the residual-add +
LayerNorm. The matmuls stay with cuBLAS."""
from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ... import learner
from ...device import DEVICE
from ...invoke import Refused
from ...op_rules import Budget, OpRule
from ...problems.base import (AnswersProblem, Case, CorrectnessProblem, Outcome, SpeedProblem,
                              is_autograd_function)
from ...timing import STEP_HOST_MS
from ...watch import current, policy
from ..attention import attention_flops

LESSON = "06_profile_first"
EPS = 1e-5
PARAM_NAMES = ("w_qkv", "b_qkv", "w_o", "b_o", "ln1_w", "ln1_b", "w_1", "b_1", "w_2", "b_2", "ln2_w", "ln2_b")


class BlockParams(NamedTuple):
    """The block's weights, as nn.Linear stores them (out_features x in_features)."""
    w_qkv: torch.Tensor
    b_qkv: torch.Tensor
    w_o: torch.Tensor
    b_o: torch.Tensor
    ln1_w: torch.Tensor
    ln1_b: torch.Tensor
    w_1: torch.Tensor
    b_1: torch.Tensor
    w_2: torch.Tensor
    b_2: torch.Tensor
    ln2_w: torch.Tensor
    ln2_b: torch.Tensor


class Shape(NamedTuple):
    B: int
    N: int
    d: int  # model width
    H: int  # heads; head dim = d // H
    mlp: int  # hidden width of the MLP


# The block the lesson profiles and times on a GPU (about 0.6 GB of fp16 scores per N x N tensor: a T4 holds it),
# and a smaller fp32 one for the CPU, where the profile is of PyTorch's CPU kernels.
GPU_SHAPE = Shape(4, 2048, 1024, 16, 4096)
CPU_SHAPE = Shape(2, 128, 512, 8, 2048)


def profile_shape() -> tuple[Shape, torch.dtype]:
    return (GPU_SHAPE, torch.float16) if DEVICE.on_gpu else (CPU_SHAPE, torch.float32)


# ------------------------------------------------------------------ the block, in plain PyTorch
_MASKS: dict = {}


def causal_mask(N: int, device) -> torch.Tensor:
    """True above the diagonal: the keys a query may not see. Made once per length and device, as a model
    would keep it in a buffer."""
    key = (N, str(device))
    if key not in _MASKS:
        _MASKS[key] = torch.ones(N, N, dtype=torch.bool, device=device).triu(1)
    return _MASKS[key]


def attention_eager(q, k, v):
    """Causal attention the way it is written without a fused kernel: the N x N scores are made, scaled,
    masked and normalised, each step a kernel that reads and writes them all."""
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    s = s.masked_fill(causal_mask(q.shape[-2], q.device), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def attention_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def block_eager(x, p: BlockParams, n_heads: int, attend=attention_eager):
    """One post-norm block (as in GPT-1 and BERT): h = LN(x + Attn(x)), out = LN(h + MLP(h))."""
    B, N, d = x.shape
    qkv = F.linear(x, p.w_qkv, p.b_qkv).view(B, N, 3, n_heads, d // n_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, N, D), views into qkv
    a = attend(q, k, v).transpose(1, 2).reshape(B, N, d)
    h = F.layer_norm(x + F.linear(a, p.w_o, p.b_o), (d,), p.ln1_w, p.ln1_b, EPS)
    m = F.linear(F.gelu(F.linear(h, p.w_1, p.b_1)), p.w_2, p.b_2)
    return F.layer_norm(h + m, (d,), p.ln2_w, p.ln2_b, EPS)


def make_params(gen, s: Shape, dtype=torch.float16, device="cpu") -> BlockParams:
    """Weights scaled like a trained model's (unit-variance activations); LayerNorm weights away from 1 and
    biases away from 0, so that a gradient that forgets them is visibly wrong."""
    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, device=gen.device) * scale).to(device=device, dtype=dtype)
    d, m = s.d, s.mlp
    return BlockParams(
        randn(3 * d, d, scale=d ** -0.5), randn(3 * d, scale=0.1), randn(d, d, scale=d ** -0.5), randn(d, scale=0.1),
        1 + randn(d, scale=0.2), randn(d, scale=0.2), randn(m, d, scale=d ** -0.5), randn(m, scale=0.1),
        randn(d, m, scale=m ** -0.5), randn(d, scale=0.1), 1 + randn(d, scale=0.2), randn(d, scale=0.2))


def block_inputs(gen, s: Shape, dtype=torch.float16, device="cpu") -> list:
    """[x, *params, dout, n_heads]: what the block checks pass around."""
    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=gen.device).to(device=device, dtype=dtype)
    x = randn(s.B, s.N, s.d)
    p = make_params(gen, s, dtype, device)
    return [x, *p, randn(s.B, s.N, s.d), s.H]


def unpack(inputs) -> tuple:
    """[x, *params, dout, n_heads] -> (x, params, dout, n_heads)."""
    return inputs[0], BlockParams(*inputs[1:13]), inputs[13], inputs[14]


def with_grads(forward, x, params, dout, n_heads, dtype=None, backward_rule=contextlib.nullcontext):
    """One training step's work: ``forward(x, params, n_heads)`` on fresh leaves (cast to ``dtype`` if given),
    then autograd's gradients of x and every weight. Returns (out, dx, *dparams)."""
    leaves = [(t.detach().to(dtype) if dtype else t.detach()).requires_grad_() for t in (x, *params)]
    with torch.enable_grad():
        out = forward(leaves[0], BlockParams(*leaves[1:]), n_heads)
        with backward_rule():
            grads = torch.autograd.grad(out, leaves, dout.to(out.dtype), allow_unused=True)
    return (out.detach(), *grads)


def block_reference(x, params, dout, n_heads, dtype=torch.float64):
    """The eager block in ``dtype``: (out, dx, *dparams)."""
    return with_grads(block_eager, x, params, dout, n_heads, dtype=dtype)


def block_flops(s: Shape, backward: bool = False) -> float:
    """The matmuls' FLOPs: projections and MLP, plus causal attention's (what a fused kernel must do)."""
    tokens = s.B * s.N
    f = 2.0 * tokens * (4 * s.d * s.d + 2 * s.d * s.mlp) + attention_flops(s.B, s.H, s.N, s.d // s.H, True)
    return 3 * f if backward else f


# ------------------------------------------------------------------ numeric answers read off a profile
def profile_eager(show: bool = True, plot: bool = True, iters: int = 5):
    """Profile the eager block's forward on this device; rows sorted by time (see kernellab.profiling)."""
    from ...ceilings import measure_ceilings
    from ...profiling import show as show_rows
    s, dtype = profile_shape()
    rows = profile_step(block_eager, s, dtype, iters=iters)
    if show:
        c = measure_ceilings(quiet=True)
        what = (f"fp16 on {DEVICE.name}" if DEVICE.on_gpu else
                "fp32 on the CPU (no GPU here: CPU times; bounds use the example T4 ridge)")
        print(f"The eager block, B={s.B} N={s.N} d={s.d} H={s.H} MLP {s.mlp}, forward, {what}; times per call:")
        show_rows(rows, c.ridge or _example_ridge())
        if plot:
            plot_profile(rows)
    return rows


def bound(intensity: float) -> str:
    """'memory' or 'compute': an intensity against this device's ridge point (lesson 01's ceilings)."""
    from ...ceilings import measure_ceilings
    return measure_ceilings(quiet=True).bound(intensity)


def _example_ridge() -> float:
    from ...ceilings import EXAMPLE
    return EXAMPLE.ridge


def plot_profile(rows, top: int = 10, title: str | None = None):
    import matplotlib.pyplot as plt
    rows = rows[:top]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.2))
    ax.barh([r.op.replace("aten::", "") for r in rows][::-1], [r.share * 100 for r in rows][::-1])
    ax.set_xlabel("% of the block's time")
    ax.set_title(title or f"where the eager block's time goes ({DEVICE.name})", fontsize=10)
    fig.tight_layout()
    plt.show()


def kernel_payoff(rows, top: int = 10):
    """Pick ops of a profile and a speedup: what the whole block would gain (Amdahl's law, ipywidgets)."""
    from .widgets import kernel_payoff as _payoff
    shares = {r.op.replace("aten::", ""): r.share for r in rows[:top]}
    rest = 1.0 - sum(shares.values())
    if rest > 1e-9:
        shares["(all other ops)"] = rest
    return _payoff(shares, chosen=tuple(shares)[:1])


def _profile_facts() -> dict:
    """A fresh profile of the eager block, by trusted code, for judging the answers."""
    rows = profile_eager(show=False, plot=False, iters=7)
    return {"profile": [{"op": r.op, "share": r.share, "intensity": r.intensity} for r in rows]}


def _op_name(given) -> str | None:
    if not isinstance(given, str) or not given.strip():
        return None
    g = given.strip().lower()
    return g if g.startswith("aten::") else "aten::" + g


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


TIE = 0.75  # an op with at least this fraction of the top op's time counts as "the top op": runs differ
SHARE_TOL = 0.05  # absolute, or 30 % of the share, whichever is larger


def judge_profile(problem, given: dict, facts: dict) -> Outcome:
    rows = facts["profile"]
    top = rows[0]
    by_name = {r["op"].lower(): r for r in rows}
    named = by_name.get(_op_name(given.get("TOP_OP")) or "")
    said, right = [], 0
    if named is not None and named["share"] >= TIE * top["share"]:
        right += 1
        row = named
    else:
        row = top
        ties = ", ".join(r["op"] for r in rows if r["share"] >= TIE * top["share"])
        said.append(f"TOP_OP = {given.get('TOP_OP')!r} is not the op that takes the most time; this run's profile "
                    f"says {ties} ({top['share']:.0%} of the time). Use the op column's name.")
    share = given.get("TOP_SHARE")
    if _is_number(share) and abs(share - row["share"]) <= max(SHARE_TOL, 0.3 * row["share"]):
        right += 1
    else:
        said.append(f"TOP_SHARE = {share!r}: {row['op']} took {row['share']:.1%} of the time in this run "
                    "(give a fraction between 0 and 1).")
    ai = row["intensity"]
    got = given.get("TOP_INTENSITY")
    if ai is None or (_is_number(got) and abs(got - ai) <= 0.1 * ai + 0.05):
        right += 1
    else:
        said.append(f"TOP_INTENSITY = {got!r}: {row['op']} does its FLOPs over its bytes = {ai:.2f} FLOP/byte "
                    "(the FLOP/B column).")
    ridge = facts.get("ridge") or _example_ridge()
    expect = None if ai is None else ("memory" if ai < ridge else "compute")
    bound = given.get("TOP_BOUND")
    near = ai is not None and abs(ai - ridge) <= 0.25 * ridge  # too close to the ridge to call
    if expect is None or near or (isinstance(bound, str) and bound.strip().lower() == expect):
        right += 1
    else:
        said.append(f"TOP_BOUND = {bound!r}: at {ai:.1f} FLOP/byte, against this device's ridge point of "
                    f"{ridge:.0f}, {row['op']} is {expect}-bound (answer 'memory' or 'compute').")
    msg = "All 4 answers agree with this run's profile." if right == 4 else (
        f"{right} of 4 answers agree with this run's profile. " + " ".join(said))
    return Outcome(problem.id, right / 4, msg, {"right": right, "of": 4, "top": top["op"]})


@dataclasses.dataclass
class ProfileAnswers(AnswersProblem):
    # Only a GPU profile is graded: CPU op times on a shared machine swing by several x from run to run (another
    # process takes the core for a scheduler slice), so a CPU profile is for practice.
    needs_gpu = True


PROFILE_ANSWERS = ProfileAnswers(
    "answers_profile", 4, ("TOP_OP", "TOP_SHARE", "TOP_INTENSITY", "TOP_BOUND"),
    "the eager block's top op, read off your profile", measure=_profile_facts, judge=judge_profile)


# ------------------------------------------------------------------ which torch ops each phase may use
aten = torch.ops.aten


def _packets(*names) -> frozenset:
    return frozenset(getattr(aten, n) for n in names if hasattr(aten, n))


_ATTENTION_OPS = _packets(
    "_softmax", "softmax", "_log_softmax", "log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
    "bmm", "baddbmm", "exp", "exp_", "exp2", "exp2_", "logsumexp", "_safe_softmax",
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math", "_flash_attention_forward",
    "_efficient_attention_forward", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward", "_flash_attention_backward", "_efficient_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward")
_NORM_FORWARD_OPS = _packets("native_layer_norm", "layer_norm", "var", "var_mean", "std", "std_mean", "rsqrt",
                             "rsqrt_", "sqrt", "sqrt_", "pow", "pow_", "group_norm", "native_group_norm", "rms_norm",
                             "_fused_rms_norm")
_NORM_BACKWARD_OPS = _packets("native_layer_norm_backward", "native_group_norm_backward")
LN_BACKWARD_DENY = _NORM_BACKWARD_OPS | _packets("native_layer_norm", "layer_norm")

# Reductions and exponentials, which the block's forward needs none of (linear layers, GELU, views): with them
# attention and the LayerNorms can be written element-wise in PyTorch (a broadcast product summed for Q K^T,
# expm1 + 1 for exp, means for the statistics, exp(-log(v) / 2) for rsqrt), as a red-team block did (2026-11-27).
_FORWARD_MATH = _packets("sum", "mean", "nansum", "nanmean", "amax", "amin", "max", "min", "aminmax", "prod", "cumsum",
                         "cumprod", "logsumexp", "logcumsumexp", "norm", "linalg_vector_norm", "frobenius_norm", "expm1",
                         "log", "log1p", "log2", "log10", "sigmoid", "softplus", "special_expit", "special_exp2",
                         "special_expm1", "special_log1p", "special_logsumexp", "xlogy")
BLOCK_FORWARD_DENY = _ATTENTION_OPS | _NORM_FORWARD_OPS | _FORWARD_MATH
BLOCK_BACKWARD_DENY = _ATTENTION_OPS | _NORM_BACKWARD_OPS
FORWARD_WHY = ("In this lesson the matmuls, GELU and element-wise ops may stay in PyTorch, but attention and "
               "the LayerNorms must run in your Triton kernels (FlashAttention.apply and AddLayerNorm.apply).")
BACKWARD_WHY = ("The backward pass may use PyTorch for the matmuls and for the LayerNorm's gradient, but not "
                "softmax, batched matmuls or PyTorch's own LayerNorm backward: attention's gradients come from "
                "your FlashAttention.backward.")
LN_FORWARD_WHY = ("AddLayerNorm.forward must compute with your Triton kernel (add_layernorm from lesson 03); it "
                  "may only allocate, reshape and take views. Save the inputs and recompute in the backward.")
LN_BACKWARD_WHY = ("AddLayerNorm.backward may use PyTorch ops, but not PyTorch's own LayerNorm (or its "
                   "backward): write the gradient from the formula.")


@contextlib.contextmanager
def must_launch(n: int, why: str):
    """Inside a watched call: refuse with ``why`` unless the block launches at least ``n`` Triton kernels.
    Outside one (timed runs) nothing is counted."""
    st = current()
    before = st.launches if st is not None else 0
    yield
    if st is not None and st.launches - before < n:
        raise Refused(why)


# ------------------------------------------------------------------ exercise 2: AddLayerNorm as a Function
def layernorm_through_autograd(cls, x, residual, weight, bias, dy, eps):
    """y = AddLayerNorm.apply(x, residual, weight, bias, eps), then autograd's dx, dresidual, dweight, dbias."""
    leaves = [t.detach().requires_grad_() for t in (x, residual, weight, bias)]
    with must_launch(1, "the forward launched no Triton kernel: call your add_layernorm in AddLayerNorm.forward."), \
            policy(None, LN_FORWARD_WHY):
        y = cls.apply(*leaves, eps)
    if not isinstance(y, torch.Tensor):
        raise Refused(f"AddLayerNorm.apply returned a {type(y).__name__}; it must return the output tensor y.")
    # y as the forward left it: a backward, under the looser policy, must not be where y gets its values (a
    # red-team Function, 2026-11-27, returned an empty y and filled it in from its backward with PyTorch).
    y_forward = y.detach().clone()
    with policy(LN_BACKWARD_DENY, LN_BACKWARD_WHY):
        grads = torch.autograd.grad(y, leaves, dy, allow_unused=True)
    return (y_forward, *grads)


def ln_function_case(gen, rows, cols, offset=0.0) -> Case:
    from ..l03_fused_softmax_layernorm.problems import ln_case
    c = ln_case(gen, rows, cols, "fp16", offset=offset)
    x, r, w, b, eps = c.inputs
    dy = torch.randn(rows, cols, generator=gen).half()
    return Case(c.label, [x, r, w, b, dy, eps], tags=c.tags)


def _ln_function_cases(gen, on_gpu):
    shapes = [(1, 64), (37, 96), (64, 200)] + ([(300, 1024), (128, 1536)] if on_gpu else [])
    return [ln_function_case(gen, r, c) for r, c in shapes] + [ln_function_case(gen, 16, 128, offset=30.0)]


def _ln_function_reference(case):
    x, r, w, b, dy, eps = case.inputs
    leaves = [t.double().requires_grad_() for t in (x, r, w, b)]
    with torch.enable_grad():
        h = leaves[0] + leaves[1]
        y = F.layer_norm(h, (h.shape[-1],), leaves[2], leaves[3], eps)
        grads = torch.autograd.grad(y, leaves, dy.double())
    return (y.detach(), *grads)


def _ln_grads_without_mean_terms(case):
    """A known mistake: dx = rstd * w * dy, as if the mean and the variance did not depend on x."""
    x, r, w, _b, dy, eps = case.inputs
    y, _, _, dw, db = _ln_function_reference(case)
    h = x.double() + r.double()
    rstd = 1 / torch.sqrt(h.var(-1, unbiased=False, keepdim=True) + eps)
    dx = rstd * w.double() * dy.double()
    return (y, dx, dx, dw, db)


# The judge's rule for the Function's recorded call (op_rules.py): the forward only launches, allocates and takes
# views; the backward computes the gradient from the formula with element-wise ops and row sums.
_ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "neg", "_to_copy", "copy_", "add_", "mul_", "sub_", "div_"})
_LN_BACKWARD_MATH = frozenset({"sum", "mean", "pow", "rsqrt", "sqrt", "var", "var_mean"})


def _ln_budget(inputs) -> Budget:
    x = inputs[0]
    return Budget(tokens=x.numel() // x.shape[-1], flops=0.0, forward_elements=0,
                  backward_elements=LN_BACKWARD_PASSES * x.numel())


# The solution's backward writes 16-21 times x's elements (CPU cases, 2026-11-27); the forward nothing.
LN_BACKWARD_PASSES = 100
LN_RULE = OpRule(forward=frozenset(), backward=_ELEMENTWISE | _LN_BACKWARD_MATH, output=0, weights=(),
                 budget=_ln_budget, why=LN_FORWARD_WHY)

LN_HINTS = {"offset": ("Right on ordinary rows and wrong on rows whose mean is far from zero: compute the "
                       "statistics from h - mean in float32.")}

LAYERNORM_FUNCTION = CorrectnessProblem(
    "layernorm_function_correct", 3, ("AddLayerNorm",), "AddLayerNorm.apply and its gradients",
    signature="AddLayerNorm.apply(x, residual, weight, bias, eps)", make_cases=_ln_function_cases,
    reference=_ln_function_reference, out_dtype=lambda c: (torch.float16,) * 5,
    out_shape=lambda c: (tuple(c.inputs[0].shape),) * 3 + (tuple(c.inputs[2].shape),) * 2,
    outputs=("y", "dx", "dresidual", "dweight", "dbias"), call=layernorm_through_autograd,
    validate=is_autograd_function("AddLayerNorm"), hints=LN_HINTS, own_outputs=False, replay_call=True, replay_ops=LN_RULE,
    mistakes=((_ln_grads_without_mean_terms, (
        "dx is rstd * w * dy: the gradient through the mean and the variance is missing (subtract the mean of "
        "w*dy and x_hat times the mean of w*dy*x_hat)."),),))


# ------------------------------------------------------------------ exercise 3: the block with your kernels
_TOO_FEW_LAUNCHES = ("the forward launched fewer than 2 Triton kernels: attention (FlashAttention.apply) and the "
                     "LayerNorms (AddLayerNorm.apply) must run your kernels.")


def run_block(fn, x, params, n_heads, too_few: str = _TOO_FEW_LAUNCHES, why: str = FORWARD_WHY):
    """The learner's block forward under this lesson's rules: attention and LayerNorm in Triton (lesson 07 says
    ``too_few`` and ``why`` its own way: there the kernels are reached through custom ops)."""
    with must_launch(2, too_few), policy(BLOCK_FORWARD_DENY, why):
        out = fn(x, params, n_heads)
    if not isinstance(out, torch.Tensor):
        raise Refused(f"block_forward returned a {type(out).__name__}; it must return the block's output tensor.")
    return out


def block_through_autograd(fn, *inputs):
    """block_forward(x, params, n_heads) under this lesson's rules, then autograd's gradients of x and every
    parameter: (out, dx, *dparams). The check of the block, and the timed training step. The output is a copy
    taken before the backward, as in layernorm_through_autograd: a record of the call splits there (op_rules)."""
    x, params, dout, n_heads = unpack(inputs)
    kept = []

    def forward(x_, p, h):
        out = run_block(fn, x_, p, h)
        kept.append(out.detach().clone())
        return out
    _out, *grads = with_grads(forward, x, params, dout, n_heads,
                              backward_rule=lambda: policy(BLOCK_BACKWARD_DENY, BACKWARD_WHY))
    return (kept[0], *grads)


def _block_budget(inputs) -> Budget:
    x, p = inputs[0], inputs[1:13]
    tokens, d = x.numel() // x.shape[-1], x.shape[-1]
    linear = sum(2.0 * tokens * w.numel() for w in (p[0], p[2], p[6], p[8]))  # x W^T for each weight
    width = d + p[6].shape[0]  # the model's width plus the MLP's: what its element-wise work grows with
    return Budget(tokens=tokens, flops=3 * linear, forward_elements=BLOCK_FORWARD_PASSES * tokens * width,
                  backward_elements=BLOCK_BACKWARD_PASSES * tokens * width)


# Elements the other ops may write, per token per unit of width (d + MLP): the solution's forward writes 0.6-0.7
# of that, its backward 13-16, and a variant with three projections and an fp32 MLP 2.2-2.9 and 23-24 (CPU cases,
# 2026-11-27). Attention from element-wise ops writes at least 4 N d per token forward (Q K^T and P V as broadcast
# products) and twice that backward: 53 and 106 on the smallest case (N = 33, d = 64, MLP 96).
BLOCK_FORWARD_PASSES, BLOCK_BACKWARD_PASSES = 12, 50
# The judge's rule for the block's recorded call (op_rules.py): linear layers (matrix products with a weight, and
# the weights' gradients), GELU and element-wise ops; the backward also the LayerNorm gradient's row sums.
BLOCK_RULE = OpRule(forward=_ELEMENTWISE | {"mm", "addmm", "gelu", "tanh", "erf"},
                    backward=_ELEMENTWISE | _LN_BACKWARD_MATH | {"mm", "addmm", "gelu_backward", "tanh_backward",
                                                                 "erf", "tanh", "stack", "cat", "slice_backward",
                                                                 "select_backward"},
                    output=0, weights=(1, 3, 7, 9), budget=_block_budget, why=FORWARD_WHY)
BLOCK_FORWARD_RULE = dataclasses.replace(BLOCK_RULE, split=False)  # the timed forward alone


def _block_cases(gen, on_gpu):
    shapes = [Shape(1, 40, 64, 2, 128), Shape(2, 33, 64, 4, 96), Shape(1, 70, 128, 2, 256)]
    if on_gpu:
        shapes += [Shape(2, 300, 256, 4, 1024), Shape(1, 1000, 512, 4, 2048), Shape(3, 129, 384, 6, 1536)]
    cases = []
    for s in shapes:
        label = f"B={s.B} N={s.N} d={s.d} H={s.H} (head dim {s.d // s.H}) MLP {s.mlp}"
        cases.append(Case(label, block_inputs(gen, s), tags=("tail",) if s.N % 64 else ()))
    return cases


def _block_reference(case):
    return block_reference(*unpack(case.inputs))


BLOCK_OUTPUTS = ("output", "dx") + tuple("d" + n for n in PARAM_NAMES)

BLOCK = CorrectnessProblem(
    "block_correct", 4, ("block_forward",), "the block with your kernels: output and gradients",
    signature="block_forward(x, params, n_heads)", make_cases=_block_cases, reference=_block_reference,
    out_dtype=lambda c: (torch.float16,) * len(BLOCK_OUTPUTS),
    out_shape=lambda c: (tuple(c.inputs[0].shape),) * 2 + tuple(tuple(t.shape) for t in c.inputs[1:13]),
    outputs=BLOCK_OUTPUTS, call=block_through_autograd, own_outputs=False, replay_call=True, replay_ops=BLOCK_RULE)


# ------------------------------------------------------------------ speed of the block
def _speed_inputs(gen, device):
    return block_inputs(gen, GPU_SHAPE, torch.float16, device)


def _forward_call(fn, *inputs):
    x, params, _dout, n_heads = unpack(inputs)
    return run_block(fn, x, params, n_heads)


def _eager_forward(*inputs):
    x, params, _dout, n_heads = unpack(inputs)
    return block_eager(x, params, n_heads)


def _eager_step(*inputs):
    return with_grads(block_eager, *unpack(inputs))


def _reference_out(inputs):
    x, params, _dout, n_heads = unpack(inputs)
    with torch.no_grad():
        return block_eager(x.float(), BlockParams(*(p.float() for p in params)), n_heads)


_LN_GRADS = tuple(2 + PARAM_NAMES.index(n) for n in ("ln1_w", "ln1_b", "ln2_w", "ln2_b"))
STEP_SKETCH_DX = 1 << 16


def step_sketch(step):
    """What a training step's speed check samples from: dx's first 64K elements and the four LayerNorm parameters'
    gradients. dx alone missed a LayerNorm backward whose dweight summed one program's partials (right dx, wrong
    weight gradients: 0.6 points of step speed on an H100, 2026-11-26); a quarter of the samples, and more, now land
    on those gradients."""
    return torch.cat([step[1].reshape(-1)[:STEP_SKETCH_DX]] + [step[i].reshape(-1) for i in _LN_GRADS])


def _reference_step_sketch(inputs):
    return step_sketch(block_reference(*unpack(inputs), dtype=torch.float32))


def _bytes(inputs):
    """At least: x and every weight read, the output written (fp16)."""
    return 2 * sum(t.numel() for t in inputs[:13]) + 2 * inputs[0].numel()


BLOCK_SPEED = SpeedProblem(
    "block_speed", 2, ("block_forward",), "the block's forward: yours vs eager", signature=BLOCK.signature,
    make_inputs=_speed_inputs, baseline=_eager_forward, baseline_name="the eager block", reference_full=_reference_out,
    bytes_moved=_bytes, flops=lambda inputs: block_flops(GPU_SHAPE), bands=((2.0, 1.0), (1.5, 0.6), (1.2, 0.3)),
    out_dtype=lambda inputs: torch.float16, precheck=BLOCK, call=_forward_call, replay_call=True,
    replay_ops=BLOCK_FORWARD_RULE, host_ms=STEP_HOST_MS)

BLOCK_TRAIN_SPEED = SpeedProblem(
    "block_train_speed", 2, ("block_forward",), "a training step's forward and backward: yours vs eager",
    signature=BLOCK.signature, make_inputs=_speed_inputs, baseline=_eager_step, baseline_name="the eager block",
    reference_full=_reference_step_sketch, sketch_of=step_sketch, bytes_moved=lambda i: 3 * _bytes(i),
    flops=lambda inputs: block_flops(GPU_SHAPE, backward=True), bands=((1.3, 1.0), (1.15, 0.6), (1.05, 0.3)),
    out_dtype=lambda inputs: torch.float16, precheck=BLOCK, call=block_through_autograd, host_ms=STEP_HOST_MS,
    replay_call=True, replay_ops=BLOCK_RULE)

PROBLEMS = [PROFILE_ANSWERS, LAYERNORM_FUNCTION, BLOCK, BLOCK_SPEED, BLOCK_TRAIN_SPEED]



# ------------------------------------------------------------------ what the notebook calls
check_answers_profile = learner.checker(PROFILE_ANSWERS)
check_layernorm_function = learner.checker(LAYERNORM_FUNCTION)
check_block = learner.checker(BLOCK)
check_block_speed = learner.checker(BLOCK_SPEED)
check_block_train_speed = learner.checker(BLOCK_TRAIN_SPEED)


# ------------------------------------------------------------------ measurements the notebook shows
def roofline_of(rows, top: int = 10):
    """Each profiled op that does arithmetic, on this device's roofline (ops that only copy have no FLOPs and
    sit at intensity 0: listed, not drawn)."""
    from ...roofline import plot_roofline
    points, copies = [], []
    for r in rows[:top]:
        if r.flops is None:
            continue
        if not r.flops:
            copies.append(r.op)
            continue
        points.append({"label": r.op.replace("aten::", ""), "flops": r.flops, "bytes": r.bytes,
                       "ms": r.ms if DEVICE.on_gpu else None})
    if copies:
        print(f"Only moving bytes, no FLOPs (off the chart at intensity 0): {', '.join(copies)}")
    return plot_roofline(points, title=f"The eager block's ops on the roofline ({DEVICE.name})")


def contenders(block_forward=None) -> dict:
    """name -> forward function (x, params, n_heads) of each way to run the block."""
    fns = {"eager": block_eager,
           "eager + SDPA": lambda x, p, h: block_eager(x, p, h, attend=attention_sdpa)}
    if DEVICE.on_gpu:
        fns["torch.compile"] = torch.compile(block_eager, dynamic=False)
    if block_forward is not None:
        fns["yours"] = block_forward
    return fns


def time_block(fns: dict, s: Shape = GPU_SHAPE, rounds: int = 3, progress: bool = True) -> dict:
    """Median ms of the forward and of a training step (forward + gradients of x and every weight) for each
    contender, interleaved on one set of inputs (GPU only); the step also by do_bench, launches paid."""
    import sys

    from tqdm.auto import tqdm

    from ...timing import interleaved, time_steps
    dev = DEVICE.torch_device
    x, params, dout, H = unpack(block_inputs(torch.Generator(dev).manual_seed(1), s, torch.float16, dev))
    res = {}
    bar = tqdm(total=2, desc="timing the block", file=sys.stdout, leave=False, disable=not progress)
    with torch.no_grad():
        fwd = interleaved({n: (lambda f=f: f(x, params, H)) for n, f in fns.items()}, rounds)
    bar.update(1)
    steps = {n: (lambda f=f: with_grads(f, x, params, dout, H)) for n, f in fns.items()}
    train, paid = time_steps(steps, rounds)  # as block_train_speed times it, and with launches paid
    bar.update(1)
    bar.close()
    for n in fns:
        res[n] = {"forward_ms": fwd[n], "train_ms": train[n], "forward_rounds": fwd[f"{n}_all"],
                  "train_rounds": train[f"{n}_all"], "train_do_bench_ms": paid[n],
                  "forward_tflops": block_flops(s) / fwd[n] / 1e9, "train_tflops": block_flops(s, True) / train[n] / 1e9}
    return res


def plot_block_times(res: dict, title: str | None = None, path=None):
    import matplotlib.pyplot as plt
    names = list(res)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, key, what in ((axes[0], "forward_ms", "forward"), (axes[1], "train_ms", "training step (fwd + bwd)")):
        vals = [res[n][key] for n in names]
        bars = ax.barh(names[::-1], vals[::-1], color=["C0" if n != "yours" else "C3" for n in names[::-1]])
        base = res[names[0]][key]
        for b, v in zip(bars, vals[::-1]):
            ax.text(v, b.get_y() + b.get_height() / 2, f" {v:.2f} ms ({base / v:.2f}x)", va="center", fontsize=8)
        ax.set_xlabel("ms (lower is better)")
        ax.set_title(what, fontsize=10)
        ax.set_xlim(0, max(vals) * 1.5)
    fig.suptitle(title or f"the block, B={GPU_SHAPE.B} N={GPU_SHAPE.N} d={GPU_SHAPE.d} on {DEVICE.name}", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def compare_block(block_forward, rounds: int = 3):
    """Eager, eager with SDPA, torch.compile and your kernels: forward and training step, with a chart."""
    if not DEVICE.on_gpu:
        print("No GPU: the comparison needs one. assets/bench/lesson06.md has an H100's numbers.")
        return {}
    import matplotlib.pyplot as plt
    res = time_block(contenders(block_forward), rounds=rounds)
    for n, r in res.items():
        print(f"{n:>14}: forward {r['forward_ms']:.3f} ms, training step {r['train_ms']:.3f} ms of GPU work "
              f"({r['train_do_bench_ms']:.3f} ms with its launches, do_bench)")
    plot_block_times(res)
    plt.show()
    return res


def profile_step(forward, s: Shape, dtype=torch.float16, train: bool = False, iters: int = 3):
    """Profile rows of ``forward(x, params, n_heads)`` on this device, or of a training step's GPU work
    (forward, then the gradients of x and every weight) with ``train``."""
    from ...profiling import profile
    dev = DEVICE.torch_device
    x, params, dout, H = unpack(block_inputs(torch.Generator(dev).manual_seed(6), s, dtype, dev))
    if not train:
        with torch.no_grad():
            return profile(lambda: forward(x, params, H), torch.finfo(dtype).bits // 8, iters=iters)

    def step():
        return with_grads(forward, x, params, dout, H)
    return profile(step, torch.finfo(dtype).bits // 8, iters=iters)


def profile_yours(block_forward, top: int = 8):
    """The block again with your kernels, forward and training step: what is left to win, and where."""
    from ...ceilings import measure_ceilings
    from ...profiling import show
    if not DEVICE.on_gpu:
        print("No GPU: a profile here would time Triton's CPU interpreter running your kernels in Python - "
              "nothing to act on. assets/bench/lesson06.md has an H100's profiles of this block with the "
              "course's kernels.")
        return {}
    ridge = measure_ceilings(quiet=True).ridge
    rows = {}
    for train in (False, True):
        rows["training step" if train else "forward"] = r = profile_step(block_forward, GPU_SHAPE, train=train)
        print(f"\nYour block, {'training step (forward + backward)' if train else 'forward'}:")
        show(r, ridge, top=top)
    return rows


def going_further() -> None:
    from ...device import explain_extensions
    rows = [
        ("a Triton LayerNorm backward (dx by row, dweight/dbias by column blocks with a second reduction)", True, ""),
        ("fuse the bias and GELU into the first MLP matmul (lesson 02's epilogue)", True, ""),
        ("register your kernels as torch.library custom ops so torch.compile traces around them", True, ""),
        ("CUDA graphs for the whole step (torch.cuda.graphs) when launch overhead shows in the profile",
         DEVICE.on_gpu, "needs a GPU"),
        ("bf16 end to end", DEVICE.supports_bf16(), "needs sm_80+; the interpreter has no bf16"),
    ]
    explain_extensions(rows)
