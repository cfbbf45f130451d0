"""Lesson 10: mixture of experts - top-k routing, the permutation (histogram, prefix sum, destinations), a
grouped GEMM in one launch, the fused MoE MLP forward, and the grouped GEMM's backward."""
from __future__ import annotations

import torch

from ... import learner
from ...device import DEVICE
from ...problems.base import (Answer, AnswersProblem, Case, CorrectnessProblem, SpeedProblem,
                              is_autograd_function)
from ..l08_hopper.problems import tma_legal  # noqa: F401 - section 8's persistent kernel asks it, as lesson 08 does
from .widgets import tile_table  # noqa: F401 - the schedule the kernel computes, for the notebook and tests

LESSON = "10_mixture_of_experts"

# ------------------------------------------------------------------ numeric answers
# A fine-grained MoE layer of the size the benchmark times (64 experts, 8 per token, d_ff 1408).
ANSWER_SHAPE = {"T": 8192, "E": 64, "TOP_K": 8, "D_MODEL": 2048, "D_FF": 1408}
SMALL_T = 256  # a decode-sized batch of tokens


def moe_flops(tokens: int, top_k: int, d_model: int, d_ff: int) -> int:
    """Gate and up projections (d_model -> 2 d_ff) and the down projection (d_ff -> d_model), for each of the
    tokens * top_k rows the experts see: 2 FLOPs a multiply-add."""
    return 2 * tokens * top_k * d_model * 3 * d_ff


def moe_weight_bytes(experts: int, d_model: int, d_ff: int) -> int:
    return experts * 3 * d_model * d_ff * 2  # fp16


def _moe_answers(facts):
    T, E, k, d, f = (ANSWER_SHAPE[n] for n in ("T", "E", "TOP_K", "D_MODEL", "D_FF"))
    small_bytes = moe_weight_bytes(E, d, f) + 2 * SMALL_T * d * 2  # every expert's weights, x in and out once
    intensity = moe_flops(SMALL_T, k, d, f) / small_bytes
    return [
        Answer("MOE_FLOPS", moe_flops(T, k, d, f), explain=(
            "Each token goes through TOP_K experts, each an MLP of three D_MODEL by D_FF matrices (gate, up, down); "
            "a matrix-vector product costs a multiply-add (two FLOPs) per weight.")),
        Answer("WEIGHT_BYTES", moe_weight_bytes(E, d, f), explain=(
            "E experts of three D_MODEL by D_FF matrices in fp16 (2 bytes a value).")),
        Answer("LOOP_GEMMS", 2 * E, explain=(
            "The loop runs, for each expert, one matmul for gate and up together and one for down: count the "
            "launches of matmul alone, each on a different number of rows.")),
        Answer("SMALL_INTENSITY", intensity, rel_tol=0.03, explain=(
            "At 256 tokens: the FLOPs (the same count as MOE_FLOPS, for these tokens) over the bytes that must move "
            "at least once: every expert's weights (each is chosen by some token almost surely), plus x read and "
            "the output written in fp16.")),
        Answer("SMALL_BOUND", facts["bound"](intensity), explain=(
            "Compare SMALL_INTENSITY with this GPU's ridge point: at a few rows per expert, which ceiling binds?")),
    ]


ANSWERS = AnswersProblem("answers_moe", 2, ("MOE_FLOPS", "WEIGHT_BYTES", "LOOP_GEMMS", "SMALL_INTENSITY",
                                            "SMALL_BOUND"), "what an MoE layer costs", answers=_moe_answers)


# ------------------------------------------------------------------ references
def reference_route(logits: torch.Tensor, top_k: int):
    """The routing the course defines, in float64 where it computes: the top_k largest logits of each row in
    descending order, ties to the lower expert index; softmax weights over those top_k logits; then the
    permutation: per-expert counts, offsets (exclusive prefix sum, E + 1 of them) and, for each slot
    s = t * top_k + j, its row in the expert-sorted order (slots of one expert keep their order)."""
    logits = logits.detach().to("cpu", torch.float64)
    vals, idx = torch.sort(logits, dim=1, descending=True, stable=True)
    experts = idx[:, :top_k]
    weights = torch.softmax(vals[:, :top_k], dim=1)
    flat = experts.reshape(-1)
    counts = torch.bincount(flat, minlength=logits.shape[1])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0)])
    order = torch.sort(flat, stable=True).indices
    dest = torch.empty_like(order)
    dest[order] = torch.arange(order.numel())
    return weights, experts, counts, offsets, dest


def grouped_reference(x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """y[rows of expert e] = x[rows of expert e] @ w[e], in float64."""
    bounds = offsets.tolist()
    y = torch.zeros(x.shape[0], w.shape[2], dtype=torch.float64)
    for e in range(w.shape[0]):
        lo, hi = bounds[e], bounds[e + 1]
        if hi > lo:
            y[lo:hi] = x[lo:hi].double() @ w[e].double()
    return y


def grouped_grads_reference(x, w, offsets, dy):
    """dX and dW of the grouped GEMM, in float64: dX_e = dY_e W_e^T, dW_e = X_e^T dY_e (zero for an empty expert)."""
    bounds = offsets.tolist()
    dx = torch.zeros(x.shape, dtype=torch.float64)
    dw = torch.zeros(w.shape, dtype=torch.float64)
    for e in range(w.shape[0]):
        lo, hi = bounds[e], bounds[e + 1]
        if hi > lo:
            dx[lo:hi] = dy[lo:hi].double() @ w[e].double().t()
            dw[e] = x[lo:hi].double().t() @ dy[lo:hi].double()
    return dx, dw


def moe_reference(x, w_gate_up, w_down, experts, weights, dtype=torch.float64):
    """The MoE MLP: out[t] = sum_j weights[t, j] * down_e(silu(x[t] W_gate_e) * (x[t] W_up_e)), e = experts[t, j];
    W_gate_e and W_up_e are the first and second halves of w_gate_up[e]'s columns."""
    f = w_gate_up.shape[2] // 2
    xs = x.to(dtype)
    out = torch.zeros(x.shape, dtype=dtype, device=x.device)
    for e in range(w_gate_up.shape[0]):
        tok, slot = torch.nonzero(experts == e, as_tuple=True)
        if tok.numel() == 0:
            continue
        gu = xs[tok] @ w_gate_up[e].to(dtype)
        y = (torch.nn.functional.silu(gu[:, :f]) * gu[:, f:]) @ w_down[e].to(dtype)
        out.index_add_(0, tok, y * weights[tok, slot].to(dtype)[:, None])
    return out


# ------------------------------------------------------------------ routing
def route_case(gen, T, E, k, kind="randn", strided=False) -> Case:
    if kind == "ties":  # a few distinct values: most rows hold ties, at the top and below
        logits = torch.randint(0, 3, (T, E), generator=gen).float()
    elif kind == "one_expert":  # every token's largest logit is on one expert
        logits = torch.randn(T, E, generator=gen)
        logits[:, E // 3] += 100.0
    else:
        logits = torch.randn(T, E, generator=gen) * 2.0
    if strided:  # rows of a wider tensor: stride(0) != E
        wide = torch.randn(T, E + 5, generator=gen)
        wide[:, :E] = logits
        logits = wide[:, :E]
    tags = [kind] + (["strided"] if strided else []) + (["empty"] if T * k < E else [])
    label = f"T={T}, E={E}, top_k={k}" + {"ties": ", tied logits", "one_expert": ", every token on one expert",
                                          "randn": ""}[kind] + (", row-strided logits" if strided else "")
    return Case(label, [logits, k], tags=tuple(tags))


def _route_cases(gen, on_gpu):
    fixed = [(1, 4, 1), (37, 6, 2, "ties"), (3, 64, 2), (50, 8, 1, "one_expert"), (64, 16, 4, "ties", True),
             (200, 60, 8), (129, 32, 3, "one_expert")]
    # more blocks of slots than the offsets kernel reads at once (the solution: 4096 // E_pad blocks a step)
    fixed.append((4096, 128, 8) if on_gpu else (300, 128, 8, "ties"))
    t = int(torch.randint(1, 2000 if on_gpu else 200, (1,), generator=gen))
    e = int(torch.randint(2, 100, (1,), generator=gen))
    fixed.append((t, e, int(torch.randint(1, min(e, 8) + 1, (1,), generator=gen))))
    return [route_case(gen, *f) for f in fixed]


def _route_ref(case):
    w, ex, c, o, d = reference_route(case.inputs[0], case.inputs[1])
    return w, ex, c, o, d


def _route_dtypes(case):
    return torch.float32, torch.int32, torch.int32, torch.int32, torch.int32


def _route_shapes(case):
    (T, E), k = case.inputs[0].shape, case.inputs[1]
    return (T, k), (T, k), (E,), (E + 1,), (T * k,)


ROUTE_HINTS = {
    "ties": ("It is wrong only where logits tie. The course's rule: among equal logits the lower expert index "
             "comes first (take the smallest index among the positions that equal the maximum), and a slot's "
             "destination keeps slot order within its expert."),
    "strided": "It is wrong only for row-strided logits: step from row to row with logits.stride(0), not E.",
    "one_expert": ("It is wrong only when every token picks one expert: that expert's count is T, the others 0; "
                   "check that ranks within an expert keep counting across blocks of slots."),
    "empty": ("It is wrong only when some experts get no token: their count is 0 and their offset equals the "
              "next expert's."),
}

# One problem from the float logits to the permutation, not a separate permute(experts): the worker gets fresh
# random values only for floating-point inputs (harness.decoy_case), so integer inputs reach it as the judge has
# them, and integer outputs of integer inputs alone could be computed on the host and replayed as fill_ numbers.
ROUTE = CorrectnessProblem(
    "routing_correct", 4, ("route",), "route(logits, top_k): top-k, softmax weights and the permutation",
    signature="route(logits, top_k)", make_cases=_route_cases, reference=_route_ref, out_dtype=_route_dtypes,
    out_shape=_route_shapes, hints=ROUTE_HINTS, outputs=("weights", "experts", "counts", "offsets", "dest"))


# ------------------------------------------------------------------ grouped GEMM cases
def _group_sizes(gen, E, M, empty=0.3, one=None):
    """Random group sizes summing to M, about ``empty`` of the experts without rows; ``one``: all on one expert."""
    if one is not None:
        sizes = torch.zeros(E, dtype=torch.long)
        sizes[one] = M
        return sizes
    share = torch.rand(E, generator=gen) * (torch.rand(E, generator=gen) >= empty)
    if share.sum() == 0:
        share[0] = 1.0
    sizes = torch.floor(share / share.sum() * M).long()
    sizes[int(torch.argmax(share))] += M - int(sizes.sum())
    return sizes


def _offsets(sizes):
    return torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(sizes, 0)]).to(torch.int32)


def _transposed(t: torch.Tensor, dims=(0, 1)) -> torch.Tensor:
    """Same values, the two dims swapped in storage: a non-contiguous view."""
    return t.transpose(*dims).contiguous().transpose(*dims)


def grouped_case(gen, E, M, K, N, x_t=False, w_t=False, long_k=False, one=None, sizes=None, with_dy=False) -> Case:
    sizes = sizes if sizes is not None else _group_sizes(gen, E, M, one=one)
    if long_k:  # partial sums grow, then cancel: fp16 accumulation loses them
        sign = torch.where(torch.arange(K) < K // 2, 1.0, -1.0)
        x = ((torch.rand(M, K, generator=gen) + 0.5) * sign).half()
        w = (torch.rand(E, K, N, generator=gen) + 0.5).half()
    else:
        x = torch.randn(M, K, generator=gen).half()
        w = (torch.randn(E, K, N, generator=gen) * float(torch.empty(1).uniform_(0.5, 2.0, generator=gen))).half()
    tags = [t for t, on in (("empty", bool((sizes == 0).any())), ("tail", bool((sizes % 16 != 0).any())),
                            ("x_transposed", x_t), ("w_transposed", w_t), ("transposed", x_t or w_t),
                            ("long_k", long_k), ("one_expert", one is not None)) if on]
    label = (f"E={E}, M={M}, K={K}, N={N}, group sizes {sizes.tolist()[:6]}{'...' if E > 6 else ''}"
             + (", x transposed" if x_t else "") + (", w transposed" if w_t else "")
             + (", long K whose partial sums cancel" if long_k else ""))
    inputs = [_transposed(x) if x_t else x, _transposed(w, (1, 2)) if w_t else w, _offsets(sizes)]
    if with_dy:
        inputs.append(torch.randn(M, N, generator=gen).half())
    return Case(label, inputs, tags=tuple(tags))


def _grouped_shapes(gen, on_gpu):
    big = dict(E=16, M=1500, K=512, N=384) if on_gpu else dict(E=6, M=150, K=64, N=48)
    return [dict(E=4, M=23, K=48, N=40, sizes=torch.tensor([5, 0, 17, 1])), dict(E=1, M=1, K=16, N=16),
            dict(E=5, M=70, K=71, N=53, one=2), dict(E=8, M=40, K=32, N=24, sizes=torch.tensor([0] * 7 + [40])),
            dict(big), dict(big, x_t=True), dict(big, w_t=True),
            dict(E=3, M=48, K=4096 if on_gpu else 1024, N=32, long_k=True),
            dict(E=int(torch.randint(2, 40, (1,), generator=gen)), M=int(torch.randint(1, 600 if on_gpu else 120, (1,),
                 generator=gen)), K=int(torch.randint(8, 300 if on_gpu else 100, (1,), generator=gen)),
                 N=int(torch.randint(8, 300 if on_gpu else 100, (1,), generator=gen)))]


def _grouped_cases(gen, on_gpu):
    return [grouped_case(gen, **d) for d in _grouped_shapes(gen, on_gpu)]


GROUPED_HINTS = {
    "w_transposed": ("It is wrong only when w is a transposed view: step through w with w.stride(0), w.stride(1) and "
                     "w.stride(2), not the contiguous strides."),
    "x_transposed": "It is wrong only when x_sorted is transposed: use x_sorted.stride(0) and x_sorted.stride(1).",
    "transposed": "It is wrong only on non-contiguous inputs: pass every stride to the kernel.",
    "long_k": ("Only the long-K case is wrong, where partial sums grow large before they cancel: accumulate in "
               "float32 and convert once, when storing."),
    "one_expert": ("It is wrong when all rows belong to one expert: that expert needs cdiv(M, BLOCK_M) row tiles, "
                   "and the others none."),
    "empty": ("It is wrong only when some experts have no rows: an empty expert owns no tile, and the tiles of the "
              "experts after it start where the previous expert's rows end."),
    "tail": ("It is wrong only when group sizes are not multiples of the block: mask rows at the end of each "
             "expert's rows (rows < offsets[e + 1]), not at M."),
}


def _fp16(case):
    return torch.float16


GROUPED = CorrectnessProblem(
    "grouped_matmul_correct", 4, ("grouped_matmul",), "grouped_matmul(x_sorted, w, expert_offsets)",
    signature="grouped_matmul(x_sorted, w, expert_offsets)", make_cases=_grouped_cases,
    reference=lambda c: grouped_reference(*c.inputs), out_dtype=_fp16,
    out_shape=lambda c: (c.inputs[0].shape[0], c.inputs[1].shape[2]), hints=GROUPED_HINTS)


# ------------------------------------------------------------------ the fused MoE MLP
def moe_case(gen, T, D, F, E, k, hot=None) -> Case:
    x = torch.randn(T, D, generator=gen).half()
    w_gate_up = (torch.randn(E, D, 2 * F, generator=gen) / D ** 0.5).half()
    w_down = (torch.randn(E, F, D, generator=gen) / F ** 0.5).half()
    logits = torch.randn(T, E, generator=gen)
    if hot is not None:  # most tokens' first choice is one expert: one big group, many small or empty ones
        logits[:, hot] += 3.0
    weights, experts = reference_route(logits, k)[:2]
    tags = ("empty",) if T * k < E or hot is not None else ()
    label = f"T={T}, D={D}, F={F}, E={E}, top_k={k}" + (f", most tokens on expert {hot}" if hot is not None else "")
    return Case(label, [x, w_gate_up, w_down, experts.to(torch.int32), weights.float()], tags=tags)


def _moe_cases(gen, on_gpu):
    shapes = [(1, 32, 48, 4, 1), (37, 64, 40, 6, 2), (64, 64, 96, 8, 2, 5), (5, 40, 24, 16, 2), (50, 48, 72, 16, 4)]
    if on_gpu:
        shapes += [(700, 512, 384, 16, 4), (1000, 256, 352, 64, 8, 3)]
    return [moe_case(gen, *s) for s in shapes]


def _moe_ref(case):
    return moe_reference(*case.inputs)


MOE_HINTS = {"empty": ("It is wrong only when some experts get no token (or almost every token goes to one): "
                       "check the tile schedule and the combine with empty and very large groups.")}

MOE = CorrectnessProblem(
    "moe_forward_correct", 4, ("moe_mlp",), "moe_mlp(x, w_gate_up, w_down, experts, weights)",
    signature="moe_mlp(x, w_gate_up, w_down, experts, weights)", make_cases=_moe_cases, reference=_moe_ref,
    out_dtype=_fp16, out_shape=lambda c: tuple(c.inputs[0].shape), hints=MOE_HINTS)


# ------------------------------------------------------------------ backward
def _backward_cases(gen, on_gpu):
    picked = _grouped_shapes(gen, on_gpu)
    picked = [picked[i] for i in (0, 2, 3, 4, 5, 7)]
    return [grouped_case(gen, with_dy=True, **d) for d in picked]


def _two_shapes(case):
    return tuple(case.inputs[0].shape), tuple(case.inputs[1].shape)


BACKWARD_HINTS = {"empty": ("It is wrong only when some experts have no rows: their dW is zero, and it must be "
                            "written (the output starts as NaN)."), **GROUPED_HINTS}
del BACKWARD_HINTS["tail"]

BACKWARD = CorrectnessProblem(
    "grouped_backward_correct", 3, ("grouped_matmul_backward",),
    "grouped_matmul_backward(x_sorted, w, expert_offsets, dy)",
    signature="grouped_matmul_backward(x_sorted, w, expert_offsets, dy)", make_cases=_backward_cases,
    reference=lambda c: grouped_grads_reference(*c.inputs), out_dtype=lambda c: (torch.float16, torch.float16),
    out_shape=_two_shapes, hints=BACKWARD_HINTS, outputs=("dx", "dw"))


def through_autograd(cls, x, w, offsets, dy):
    """What training does with the Function: apply it, then ask autograd for dX and dW."""
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    y = cls.apply(x, w, offsets)
    dx, dw = torch.autograd.grad(y, (x, w), dy)
    return y.detach(), dx, dw


def _function_cases(gen, on_gpu):
    picked = _grouped_shapes(gen, on_gpu)
    return [grouped_case(gen, with_dy=True, **picked[i]) for i in (0, 2, 4)]


def _function_reference(case):
    x, w, offsets, dy = case.inputs
    return (grouped_reference(x, w, offsets), *grouped_grads_reference(x, w, offsets, dy))


FUNCTION = CorrectnessProblem(
    "grouped_function_correct", 2, ("GroupedMatmul",), "GroupedMatmul.apply(x_sorted, w, expert_offsets) and its "
    "gradients", signature="GroupedMatmul.apply(x_sorted, w, expert_offsets)", make_cases=_function_cases,
    reference=_function_reference, out_dtype=lambda c: (torch.float16,) * 3,
    out_shape=lambda c: ((c.inputs[0].shape[0], c.inputs[1].shape[2]),) + _two_shapes(c), hints=BACKWARD_HINTS,
    outputs=("y", "dx", "dw"), call=through_autograd, validate=is_autograd_function("GroupedMatmul", "forward(ctx, x_sorted, w, expert_offsets) and backward(ctx, dy)"), replay_call=True)


# ------------------------------------------------------------------ speed
# A few rows per expert, where the loop is at its worst; gate and up together (N = 2 * 1408), so that the graded
# call reads 0.74 GB of weights: ~170 us on an H200, above the 100 us that speed grading needs to be stable.
SPEED_SHAPE = {"T": SMALL_T, "E": 64, "TOP_K": 8, "K": 2048, "N": 2 * 1408}


def routed_sizes(gen, tokens: int, experts: int, top_k: int) -> torch.Tensor:
    """Group sizes of a random router's choice (each token's top_k of random logits)."""
    picks = torch.topk(torch.randn(tokens, experts, generator=gen), top_k, dim=1).indices
    return torch.bincount(picks.reshape(-1), minlength=experts)


def grouped_inputs(tokens, experts, top_k, k, n, gen, device):
    """x sorted by expert, w and the offsets of a random router's groups. The group sizes come from a CPU generator
    (seeded from ``gen`` where ``gen`` is not one: the judge's timed inputs use a CUDA generator); x and w are drawn
    where ``gen`` lives, so a CUDA generator makes them on the GPU."""
    cpu = gen if gen.device.type == "cpu" else \
        torch.Generator().manual_seed(int(torch.randint(1 << 62, (1,), generator=gen, device=gen.device)))
    sizes = routed_sizes(cpu, tokens, experts, top_k)
    m = int(sizes.sum())
    x = torch.randn(m, k, generator=gen, device=gen.device).to(device).half()
    w = (torch.randn(experts, k, n, generator=gen, device=gen.device) / k ** 0.5).to(device).half()
    return [x, w, _offsets(sizes).to(device)]


def _speed_inputs(gen, device):
    s = SPEED_SHAPE
    return grouped_inputs(s["T"], s["E"], s["TOP_K"], s["K"], s["N"], gen, device)


def loop_grouped_matmul(x_sorted, w, expert_offsets):
    """What one writes without a grouped kernel: a matmul per expert. The group sizes are read on the host
    first (.tolist() waits for the GPU), and each expert is its own launch, however few its rows."""
    bounds = expert_offsets.tolist()
    y = torch.empty((x_sorted.shape[0], w.shape[2]), device=x_sorted.device, dtype=x_sorted.dtype)
    for e in range(w.shape[0]):
        lo, hi = bounds[e], bounds[e + 1]
        if hi > lo:
            torch.matmul(x_sorted[lo:hi], w[e], out=y[lo:hi])
    return y


def loop_grouped_matmul_autograd(x_sorted, w, expert_offsets):
    """The same loop, differentiable (no out=): autograd records one matmul per expert and its backward."""
    bounds = expert_offsets.tolist()
    return torch.cat([x_sorted[bounds[e]:bounds[e + 1]] @ w[e] for e in range(w.shape[0])])


def _grouped_at(inputs, idx):
    x, w, offsets = inputs
    n = w.shape[2]
    i, j = idx // n, idx % n
    e = torch.searchsorted(offsets[1:].to(torch.int64), i, right=True)
    return (x[i].double() * w[e, :, j].double()).sum(dim=1)


def _grouped_bytes(inputs):
    x, w, _ = inputs
    return 2 * (x.numel() + w.numel() + x.shape[0] * w.shape[2])


def _grouped_flops(inputs):
    x, w, _ = inputs
    return 2 * x.shape[0] * x.shape[1] * w.shape[2]


GROUPED_SPEED = SpeedProblem(
    "grouped_matmul_speed", 2, ("grouped_matmul",), "grouped_matmul: speed vs a per-expert loop",
    signature="grouped_matmul(x_sorted, w, expert_offsets)", make_inputs=_speed_inputs, baseline=loop_grouped_matmul,
    baseline_name="per-expert torch.matmul loop", reference_at=_grouped_at, bytes_moved=_grouped_bytes,
    flops=_grouped_flops, metric="speedup", bands=((2.0, 1.0), (1.5, 0.6), (1.0, 0.3)),
    out_dtype=lambda inp: torch.float16, precheck=GROUPED)

PROBLEMS = [ANSWERS, ROUTE, GROUPED, GROUPED_SPEED, MOE, BACKWARD, FUNCTION]


# ------------------------------------------------------------------ what the notebook calls
check_answers_moe = learner.checker(ANSWERS)
check_route = learner.checker(ROUTE)
check_grouped_matmul = learner.checker(GROUPED)
check_grouped_matmul_speed = learner.checker(GROUPED_SPEED)
check_moe_mlp = learner.checker(MOE)
check_grouped_matmul_backward = learner.checker(BACKWARD)
check_grouped_function = learner.checker(FUNCTION)


def schedule(group_sizes=(5, 0, 17, 1, 40, 0, 9), block_m=16, **kw):
    """The grouped GEMM's row tiles for these group sizes: which expert each tile belongs to, where it starts,
    and the programs of the bound cdiv(M, BLOCK_M) + E that find nothing to do."""
    from .widgets import tile_schedule
    return tile_schedule(group_sizes, block_m, **kw)


class TinyMoE(torch.nn.Module):
    """A router and E SwiGLU experts of d_model -> d_ff -> d_model, computed as three grouped GEMMs: the
    learner's ``GroupedMatmul`` (or the loop reference) does each of them, through autograd. The routing and
    the element-wise parts stay in PyTorch: this model exercises the grouped GEMM's forward and backward."""

    def __init__(self, grouped, d_model=32, d_ff=48, experts=8, top_k=2, seed=0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.grouped, self.top_k = grouped, top_k
        self.router = torch.nn.Parameter(torch.randn(d_model, experts, generator=gen) / d_model ** 0.5)
        self.w_gate_up = torch.nn.Parameter(torch.randn(experts, d_model, 2 * d_ff, generator=gen) / d_model ** 0.5)
        self.w_down = torch.nn.Parameter(torch.randn(experts, d_ff, d_model, generator=gen) / d_ff ** 0.5)

    def forward(self, x):
        E = self.router.shape[1]
        logits, experts = torch.topk(x @ self.router, self.top_k, dim=1)
        weights = torch.softmax(logits, dim=1)  # over the chosen experts, as the lesson's routing
        flat = experts.reshape(-1)
        order = torch.sort(flat, stable=True).indices
        offsets = torch.cat([flat.new_zeros(1), torch.cumsum(torch.bincount(flat, minlength=E), 0)]).to(torch.int32)
        xs = x[order // self.top_k].half()
        gu = self.grouped(xs, self.w_gate_up.half(), offsets).float()
        f = gu.shape[1] // 2
        h = (torch.nn.functional.silu(gu[:, :f]) * gu[:, f:]).half()
        y = self.grouped(h, self.w_down.half(), offsets).float() * weights.reshape(-1)[order, None]
        return torch.zeros_like(x).index_add(0, order // self.top_k, y)


def train_tiny(GroupedMatmul, steps=None, plot=True):
    """Train a tiny MoE layer to imitate a fixed random one, twice from the same start: with your GroupedMatmul and
    with the loop of matmuls (autograd's own backward). Returns both loss curves."""
    steps = steps or (60 if DEVICE.on_gpu else 3)
    dev = DEVICE.torch_device
    gen = torch.Generator().manual_seed(1)
    x_all = torch.randn(steps, 64, 32, generator=gen).to(dev)
    teacher = TinyMoE(loop_grouped_matmul, seed=7).to(dev)
    with torch.no_grad():
        y_all = torch.stack([teacher(x) for x in x_all])
    curves = {}
    for name, grouped in (("your GroupedMatmul", GroupedMatmul.apply), ("matmul loop + autograd", loop_grouped_matmul_autograd)):
        model = TinyMoE(grouped).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        losses = []
        for x, y in zip(x_all, y_all):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        curves[name] = losses
    for name, losses in curves.items():
        print(f"{name:24s} loss {losses[0]:.4f} -> {losses[-1]:.4f} in {len(losses)} steps")
    if plot:
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3))
        for name, losses in curves.items():
            ax.plot(losses, label=name)
        ax.set_xlabel("step")
        ax.set_ylabel("MSE to the teacher")
        ax.legend()
        plt.show()
    return curves


def speed_table(grouped_matmul, shapes=((256, 64, 8, 2048, 1408), (8192, 64, 8, 2048, 1408))) -> list[dict]:
    """Your grouped GEMM, the per-expert loop, torch._grouped_mm (where it runs) and one dense matmul of the same
    FLOPs, at (tokens, experts, top_k, K, N) shapes (GPU only)."""
    if not DEVICE.on_gpu:
        print("No GPU: nothing is timed here. The committed report assets/bench/lesson10.md has an H200's numbers.")
        return []
    from ...timing import bench
    rows = []
    for tokens, experts, top_k, k, n in shapes:
        x, w, offsets = grouped_inputs(tokens, experts, top_k, k, n, torch.Generator().manual_seed(0), "cuda")
        base = _baselines(x, w, offsets, torch.float16)
        cands = {"yours": lambda: grouped_matmul(x, w, offsets), "per-expert loop": lambda: loop_grouped_matmul(x, w, offsets),
                 "dense cuBLAS, same FLOPs": base["dense"]}
        if "_grouped_mm" in base:
            cands["torch._grouped_mm"] = base["_grouped_mm"]
        row = {"shape": f"T={tokens} E={experts} top-{top_k} {k}->{n}"}
        for name, fn in cands.items():
            row[name] = bench(fn)
        rows.append(row)
        print(row["shape"] + ": " + ", ".join(f"{k} {v * 1e3:.0f} us" for k, v in row.items() if k != "shape"))
    return rows


def _baselines(x, w, offsets, dtype) -> dict:
    """What a grouped GEMM of (x, w, offsets) is timed against (GPU): ``dense``, one cuBLAS matmul of the same FLOPs,
    and ``_grouped_mm``, PyTorch's grouped GEMM on the same operands, where it runs for ``dtype`` (w laid out once as
    it wants, outside the timing)."""
    k, n = w.shape[1], w.shape[2]
    a, b = torch.randn(x.shape[0], k, device="cuda").to(dtype), torch.randn(k, n, device="cuda").to(dtype)
    out = {"dense": lambda: torch.matmul(a, b)}
    layout = grouped_mm_layout(dtype)
    if layout:
        wg = as_grouped_mm_weight(w, layout)
        out["_grouped_mm"] = lambda: torch._grouped_mm(x, wg, offs=offsets[1:])
    return out


PERSISTENT_SHAPES = ((8192, 8, 2, 4096, 14336), (8192, 64, 8, 2048, 1408))  # issue 58's two big shapes


def persistent_cases(on_gpu: bool) -> list[tuple]:
    """(sizes, K, N, x_t) cases for the persistent grouped GEMM: an empty expert and a one-row one, all rows on one
    expert, K past a multiple of 64 (w's descriptor must end each expert at K), and an x whose row stride no
    descriptor takes (36 fp16 = 72 bytes: the wrapper must fall back)."""
    big = 3 if on_gpu else 1
    return [([0, 7 * big, 33 * big, 0, 1, 20 * big], 40 * big + 24, 24 * big + 8, False),
            ([0, 0, 50 * big, 0], 72 if on_gpu else 40, 16 * big, False),
            ([5, 0, 11], 36, 24, False),
            ([9, 4, 0, 13], 48, 32, True)]


def compare_persistent(grouped_matmul, grouped_matmul_persistent) -> list[dict]:
    """Ungraded: the persistent grouped GEMM of section 8 against float64 on small cases (the interpreter too), then
    on sm_90+ timed beside ``grouped_matmul``, torch._grouped_mm and one dense matmul of the same FLOPs."""
    if DEVICE.on_gpu and not DEVICE.supports_tma():
        print(f"{DEVICE.name} ({DEVICE.cc}) has no TMA: the persistent kernel needs sm_90+. Nothing runs here.")
        return []
    gen = torch.Generator().manual_seed(58)
    dev = DEVICE.torch_device
    worst = 0.0
    for sizes, k, n, x_t in persistent_cases(DEVICE.on_gpu):
        sizes = torch.tensor(sizes)
        x = torch.randn(int(sizes.sum()), k, generator=gen).half()
        w = (torch.randn(len(sizes), k, n, generator=gen) / k ** 0.5).half()
        offsets = _offsets(sizes)
        ref = grouped_reference(x, w, offsets)
        xd = _transposed(x) if x_t else x  # the same values, column-major: no descriptor takes it
        got = grouped_matmul_persistent(xd.to(dev), w.to(dev), offsets.to(dev))
        if tuple(got.shape) != tuple(ref.shape):
            raise AssertionError(f"sizes {sizes.tolist()}, K={k}, N={n}: shape {tuple(got.shape)}, "
                                 f"expected {tuple(ref.shape)}")
        err = float((got.double().cpu() - ref).norm() / ref.norm().clamp_min(1e-30))
        if not err <= 1e-2:  # fp16 output of fp32 sums
            raise AssertionError(f"sizes {sizes.tolist()}, K={k}, N={n}: relative error {err:.1e} against float64")
        worst = max(worst, err)
    print(f"{len(persistent_cases(DEVICE.on_gpu))} cases match float64 (largest relative error {worst:.1e}).")
    if not DEVICE.on_gpu:
        print("No GPU: nothing is timed. assets/bench/lesson10.md has an H200's numbers.")
        return []
    from ...timing import bench
    dtype = torch.bfloat16 if grouped_mm_layout(torch.bfloat16) else torch.float16
    rows = []
    for tokens, experts, top_k, k, n in PERSISTENT_SHAPES:
        x, w, offsets = grouped_inputs(tokens, experts, top_k, k, n, torch.Generator().manual_seed(0), "cuda")
        x, w = x.to(dtype), w.to(dtype)
        cands = {"grouped_matmul": lambda: grouped_matmul(x, w, offsets),
                 "persistent": lambda: grouped_matmul_persistent(x, w, offsets), **_baselines(x, w, offsets, dtype)}
        ms = {name: bench(fn) for name, fn in cands.items()}
        base = "_grouped_mm" if "_grouped_mm" in cands else "dense"
        row = {"shape": f"T={tokens} E={experts} top-{top_k} {k}->{n} {str(dtype)[6:]}", "ms": ms,
               "vs": base, "grouped_matmul": ms[base] / ms["grouped_matmul"], "persistent": ms[base] / ms["persistent"]}
        rows.append(row)
        print(f"{row['shape']}: " + ", ".join(f"{c} {t * 1e3:.0f} us" for c, t in ms.items())
              + f"; x {base}: grouped_matmul {row['grouped_matmul']:.2f}, persistent {row['persistent']:.2f}")
    return rows


def grouped_mm_layout(dtype=torch.float16) -> str | None:
    """How torch._grouped_mm takes w (E, K, N) of ``dtype`` here: "row" (as it is), "col" (each expert's matrix
    stored column-major, a one-time copy of the weights), or None where it does not run (it is PyTorch's sm_90+
    grouped GEMM; what older GPUs and dtypes get differs between versions)."""
    if not DEVICE.on_gpu or not hasattr(torch, "_grouped_mm"):
        return None
    x = torch.randn(32, 64, device="cuda").to(dtype)
    offs = torch.tensor([16, 32], device="cuda", dtype=torch.int32)
    w = torch.randn(2, 64, 32, device="cuda").to(dtype)
    for layout in ("row", "col"):
        try:
            y = torch._grouped_mm(x, as_grouped_mm_weight(w, layout), offs=offs)
            torch.cuda.synchronize()
            if float((y[:16].float() - x[:16].float() @ w[0].float()).abs().max()) < 0.5:
                return layout
        except Exception:  # noqa: BLE001 - any refusal (dtype, architecture, layout) means "not this way"
            continue
    return None


def as_grouped_mm_weight(w: torch.Tensor, layout: str) -> torch.Tensor:
    return w if layout == "row" else w.transpose(1, 2).contiguous().transpose(1, 2)


def grouped_mm_available(dtype=torch.float16) -> bool:
    return grouped_mm_layout(dtype) is not None


def roofline(grouped_matmul=None, moe_mlp=None):
    """Time the grouped GEMM at the speed shape (GPU), record it and draw the roofline with every point so far."""
    from ...roofline import measure_point, plot_roofline
    if grouped_matmul is not None:
        s = SPEED_SHAPE
        t = DEVICE.size(gpu=s["T"], cpu=16)
        inputs = grouped_inputs(t, s["E"], s["TOP_K"], DEVICE.size(gpu=s["K"], cpu=64),
                                DEVICE.size(gpu=s["N"], cpu=64), torch.Generator().manual_seed(0), DEVICE.torch_device)
        measure_point(f"grouped GEMM fp16, {t} tokens", grouped_matmul, inputs, _grouped_flops(inputs),
                      _grouped_bytes(inputs))
    return plot_roofline()


def going_further() -> None:
    """Which ungraded extensions this GPU can run, and why the others are skipped."""
    from ...device import explain_extensions
    rows = [
        ("bf16 grouped GEMM (same kernels, bf16 inputs)", DEVICE.supports_bf16(), "needs sm_80+; the interpreter has no bf16"),
        ("torch._grouped_mm as the baseline", grouped_mm_available(), "PyTorch's grouped GEMM runs on sm_90+ (and where "
         "this PyTorch has it)"),
        ("FP8 experts with per-expert scales", DEVICE.supports_fp8(), "needs sm_89+"),
        ("TMA loads of the weight tiles and a persistent tile loop", DEVICE.supports_tma(), "needs sm_90"),
    ]
    explain_extensions(rows)
