"""Lesson 05: FlashAttention backward - recomputing P from the saved log-sum-exp, the D = rowsum(dO * O)
preprocessing, dK/dV by key block and dQ by query block, and an autograd.Function that trains."""
from __future__ import annotations

import math

import torch

from ... import learner
from ...device import DEVICE
from ...problems.base import (Answer, AnswersProblem, Case, CorrectnessProblem, SpeedProblem,
                              is_autograd_function)
from ..attention import (attention_flops, attention_grads_reference, attention_reference, attention_sdpa,
                        attention_sdpa_flash, label_for,
                        qkv, shapes, tags_for)

LESSON = "05_flash_attention_backward"


# ------------------------------------------------------------------ numeric answers
ANSWER_SHAPE = {"B": 4, "H": 32, "N": 16384, "D": 128}


def _backward_answers(facts):
    B, H, N, D = (ANSWER_SHAPE[k] for k in ("B", "H", "N", "D"))
    return [
        Answer("P_BYTES", B * H * N * N * 2, explain=(
            "Storing P for the backward pass: one fp16 probability per (query, key) pair in every head and batch.")),
        Answer("BWD_MATMULS", 5, explain=(
            "Write out what one tile of the backward computes, from recomputing S to the three gradients, and "
            "count the products of two matrices.")),
        Answer("BWD_FLOPS", attention_flops(B, H, N, D, False, backward=True), explain=(
            "Each of those matmuls costs what one of the forward's costs; count them against the forward's.")),
    ]


BACKWARD_ANSWERS = AnswersProblem("answers_backward", 2, ("P_BYTES", "BWD_MATMULS", "BWD_FLOPS"),
                                  "what the backward pass costs", answers=_backward_answers)


# ------------------------------------------------------------------ correctness: the backward on its own
def backward_case(gen, B, H, N, D, causal, layout) -> Case:
    """q, k, v, dO random; O and the lse from the float64 reference, so that the learner's backward is
    judged on its own (a wrong forward cannot spoil it)."""
    q, k, v, do = qkv(gen, B, H, N, D, layout, n=4)
    o, lse = attention_reference(q, k, v, causal)
    return Case(label_for(B, H, N, D, causal, layout), [q, k, v, o.half(), lse.float(), do, causal],
                tags=tags_for(N, causal, layout))


def _cases(gen, on_gpu):
    return [backward_case(gen, *s) for s in shapes(gen, on_gpu)]


def _grads(case):
    q, k, v, _, _, do, causal = case.inputs
    return attention_grads_reference(q, k, v, do, causal)


def _three_fp16(case):
    return torch.float16, torch.float16, torch.float16


def _three_shapes(case):
    return tuple(tuple(t.shape) for t in case.inputs[:3])


def _unscaled(which: int):
    def alternative(case):
        g = list(_grads(case))
        g[which] = g[which] * math.sqrt(case.inputs[0].shape[-1])
        return tuple(g)
    return alternative


SCALE_MEANING = ("{} is off by exactly sqrt(D): dS = P * (dP - delta) is the gradient with respect to the *scaled* "
                 "scores S = Q K^T / sqrt(D), so multiply by the scale once more: {}.")
MISTAKES = ((_unscaled(1), SCALE_MEANING.format("dK", "dK = scale * dS^T Q")),
            (_unscaled(0), SCALE_MEANING.format("dQ", "dQ = scale * dS K")))

BWD_HINTS = {
    "strided": ("It is wrong only for the non-contiguous inputs: address q, k, v and dO with their own strides."),
    "causal": ("It is wrong only when causal: P is 0 above the diagonal (key j > query i). Mask P (not only the "
               "scores) in both kernels, and start or stop the loops at the diagonal block, not one block off."),
    "tail": ("It is wrong only when N is not a multiple of the block: rows and keys >= N must contribute nothing "
             "(P = 0 there; loads masked with other=0) and must not be stored."),
}

BACKWARD = CorrectnessProblem(
    "flash_backward_correct", 5, ("flash_attention_backward",),
    "flash_attention_backward(q, k, v, o, lse, do, causal)",
    signature="flash_attention_backward(q, k, v, o, lse, do, causal)", make_cases=_cases, reference=_grads,
    out_dtype=_three_fp16, out_shape=_three_shapes, hints=BWD_HINTS, mistakes=MISTAKES, outputs=("dq", "dk", "dv"))


# ------------------------------------------------------------------ correctness: through autograd
def _function_case(gen, B, H, N, D, causal, layout) -> Case:
    q, k, v, do = qkv(gen, B, H, N, D, layout, n=4)
    return Case(label_for(B, H, N, D, causal, layout), [q, k, v, do, causal], tags=tags_for(N, causal, layout))


def _function_cases(gen, on_gpu):
    picked = [(1, 2, 7, 32, True, "bhnd"), (1, 2, 200, 64, False, "bhnd"), (2, 2, 300, 16, True, "bnhd"),
              (1, 2, 256, 64, False, "bhnd")]
    if on_gpu:
        picked.append((2, 4, 1000, 128, True, "bhnd"))
    return [_function_case(gen, *s) for s in picked]


def _function_reference(case):
    q, k, v, do, causal = case.inputs
    o, _ = attention_reference(q, k, v, causal)
    return (o, *attention_grads_reference(q, k, v, do, causal))


def through_autograd(cls, q, k, v, do, causal):
    """What a training step does with the Function: apply it, then ask autograd for dQ, dK and dV."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    o = cls.apply(q, k, v, causal)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    return o.detach(), dq, dk, dv


FUNCTION = CorrectnessProblem(
    "attention_function_correct", 3, ("FlashAttention",), "FlashAttention.apply(q, k, v, causal) and its gradients",
    signature="FlashAttention.apply(q, k, v, causal)", make_cases=_function_cases, reference=_function_reference,
    out_dtype=lambda c: (torch.float16,) * 4, out_shape=lambda c: (tuple(c.inputs[0].shape),) * 4,
    hints=BWD_HINTS, outputs=("output", "dq", "dk", "dv"), call=through_autograd, validate=is_autograd_function("FlashAttention", "forward(ctx, q, k, v, causal) and backward(ctx, do)"),
    replay_call=True)


# ------------------------------------------------------------------ speed
SPEED_SHAPE = (4, 16, 4096, 64, True)


def _speed_inputs(gen, device):
    B, H, N, D, causal = SPEED_SHAPE
    q, k, v, do = qkv(gen, B, H, N, D, n=4, device=device)
    o, lse = attention_reference(q, k, v, causal, dtype=torch.float32)
    return [q, k, v, o.half(), lse, do, causal]


def sdpa_backward_of(inputs, attend=attention_sdpa_flash):
    """SDPA's forward graph on these inputs, once (by default on its flash backend, see
    attention.attention_sdpa_flash); the returned callable times its backward alone."""
    q, k, v, _, _, do, causal = inputs
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = attend(qq, kk, vv, causal)

    def backward(*_):
        return torch.autograd.grad(out, (qq, kk, vv), do, retain_graph=True)
    return backward


def _reference_grads(inputs):
    q, k, v, _, _, do, causal = inputs
    return torch.cat([g.reshape(-1) for g in attention_grads_reference(q, k, v, do, causal, dtype=torch.float32)])


def _bytes(inputs):
    q = inputs[0]
    return 8 * q.numel() * q.element_size()  # q, k, v, o, dO read; dQ, dK, dV written


def _flops(inputs):
    return attention_flops(*inputs[0].shape, inputs[6], backward=True)


BACKWARD_SPEED = SpeedProblem(
    "flash_backward_speed", 2, ("flash_attention_backward",), "flash_attention_backward: speed vs SDPA's backward",
    signature="flash_attention_backward(q, k, v, o, lse, do, causal)", make_inputs=_speed_inputs,
    baseline=None, baseline_setup=sdpa_backward_of, baseline_name="SDPA flash's backward",
    reference_full=_reference_grads, sketch_of=lambda out: torch.cat([g.reshape(-1) for g in out]),
    bytes_moved=_bytes, flops=_flops, bands=((1.0, 1.0), (0.75, 0.6), (0.5, 0.3)),
    out_dtype=lambda inputs: torch.float16, precheck=BACKWARD)

PROBLEMS = [BACKWARD_ANSWERS, BACKWARD, FUNCTION, BACKWARD_SPEED]



# ------------------------------------------------------------------ what the notebook calls
check_answers_backward = learner.checker(BACKWARD_ANSWERS)
check_flash_attention_backward = learner.checker(BACKWARD)
check_attention_function = learner.checker(FUNCTION)
check_flash_backward_speed = learner.checker(BACKWARD_SPEED)


class TinyAttentionModel(torch.nn.Module):
    """Token and position embeddings, one causal self-attention layer, a linear read-out: enough to learn
    "repeat the previous token", which needs attention to look one position back."""

    def __init__(self, attend, vocab=16, n_ctx=32, heads=2, head_dim=16):
        super().__init__()
        d = heads * head_dim
        self.heads, self.head_dim, self.attend = heads, head_dim, attend
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(n_ctx, d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, vocab)

    def forward(self, tokens):
        B, N = tokens.shape
        x = self.tok(tokens) + self.pos(torch.arange(N, device=tokens.device))
        q, k, v = self.qkv(x).view(B, N, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        a = self.attend(q.half().contiguous(), k.half().contiguous(), v.half().contiguous(), True)
        return self.out(x + a.float().transpose(1, 2).reshape(B, N, -1))


def dkdv_visits(n_ctx: int, block_m: int, block_n: int, causal: bool, program: int) -> list[dict]:
    """The query blocks one dK/dV program (keys program*block_n ...) visits, the way the solution's loop runs:
    causal, it starts at the query block holding its first key (earlier queries see none of its keys).
    A tile needs the mask where it crosses the diagonal or holds rows or keys past N."""
    k0 = program * block_n
    k1 = min(k0 + block_n, n_ctx) - 1
    start = (k0 // block_m) * block_m if causal else 0
    out = []
    for r0 in range(0, n_ctx, block_m):
        r1 = min(r0 + block_m, n_ctx) - 1
        if r0 < start:
            kind = "skipped"
        elif (causal and k1 > r0) or r1 - r0 + 1 < block_m or k1 - k0 + 1 < block_n:
            kind = "masked"
        else:
            kind = "full"
        out.append({"block": r0 // block_m, "rows": (r0, r1), "keys": (k0, k1), "kind": kind})
    return out


def backward_tiles(n_ctx: int = 1000, block_m: int = 64, block_n: int = 128, causal: bool = True):
    """The two backward kernels' walks over P (ipywidgets): dK/dV down a column, dQ along a row."""
    from ..l04_flash_attention.problems import program_visits
    from .widgets import backward_tiles as _tiles
    return _tiles(dkdv_visits, program_visits, n_ctx, block_m, block_n, causal)


def train_tiny(FlashAttention, steps: int | None = None, seed: int = 0, plot: bool = True) -> dict:
    """Train the tiny model twice from the same start - attention by your FlashAttention, then by SDPA - and
    compare the losses. The task: output, at every position, the token one position back."""
    import sys

    from tqdm.auto import tqdm
    steps = steps or (200 if DEVICE.on_gpu else 8)
    dev = DEVICE.torch_device
    curves = {}
    for name, attend in (("yours", FlashAttention.apply), ("SDPA", attention_sdpa)):
        torch.manual_seed(seed)
        model = TinyAttentionModel(attend).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        gen = torch.Generator(dev).manual_seed(seed + 1)
        losses = []
        for _ in tqdm(range(steps), desc=f"training with {name}", file=sys.stdout, leave=False):
            tokens = torch.randint(0, 16, (16, 32), generator=gen, device=dev)
            logits = model(tokens)[:, 1:]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 16), tokens[:, :-1].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        curves[name] = losses
    print(f"final loss: yours {curves['yours'][-1]:.3f}, SDPA {curves['SDPA'][-1]:.3f} "
          f"(chance: ln 16 = {math.log(16):.3f})")
    if plot:
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for name, losses in curves.items():
            ax.plot(losses, label=name)
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy")
        ax.set_title(f"the tiny model, trained with each attention ({DEVICE.name})", fontsize=10)
        ax.legend()
        fig.tight_layout()
        plt.show()
    return curves


def backward_sweep(flash_attention, flash_attention_backward, Ns=(1024, 2048, 4096, 8192, 16384), B: int = 4,
                   H: int = 16, D: int = 64, causal: bool = True, plot: bool = True) -> list[dict]:
    """TFLOP/s of your backward against SDPA's, over N (GPU only)."""
    if not DEVICE.on_gpu:
        print("No GPU: the sweep needs one. assets/bench/lesson05.md has an H100's numbers.")
        return []
    import sys

    from tqdm.auto import tqdm

    from ...timing import interleaved
    rows = []
    for N in tqdm(list(Ns), desc="N", file=sys.stdout):
        q, k, v, do = qkv(torch.Generator("cuda").manual_seed(N), B, H, N, D, n=4, device="cuda")
        o, lse = flash_attention(q, k, v, causal)
        inputs = [q, k, v, o, lse, do, causal]
        sdpa = sdpa_backward_of(inputs)
        t = interleaved({"yours": lambda: flash_attention_backward(*inputs), "SDPA": sdpa}, 1)
        fl = attention_flops(B, H, N, D, causal, backward=True)
        rows.append({"N": N, "yours_tflops": fl / t["yours"] / 1e9, "SDPA_tflops": fl / t["SDPA"] / 1e9})
    if plot:
        import matplotlib.pyplot as plt

        from ...sweeps import plot_series
        plot_series(rows, "N", "_tflops", "sequence length N", "TFLOP/s (2.5 x the forward's FLOPs)",
                    f"attention backward B={B} H={H} D={D}{' causal' if causal else ''} on {DEVICE.name}")
        plt.show()
    return rows


def roofline(flash_attention_backward=None, flash_attention=None):
    """Time the backward once more (GPU), record it and draw the roofline with every point so far."""
    from ...roofline import measure_point, plot_roofline
    if flash_attention_backward is not None and flash_attention is not None:
        B, H, N, D = (4, 16, 4096, 64) if DEVICE.on_gpu else (1, 2, 256, 64)
        q, k, v, do = qkv(torch.Generator(DEVICE.torch_device).manual_seed(0), B, H, N, D, n=4,
                          device=DEVICE.torch_device)
        o, lse = flash_attention(q, k, v, False)
        measure_point("flash attention bwd", flash_attention_backward, [q, k, v, o, lse, do, False],
                      attention_flops(B, H, N, D, False, backward=True), 8 * q.numel() * 2)
    return plot_roofline()


def going_further() -> None:
    from ...device import explain_extensions
    rows = [
        ("one kernel for dK, dV and dQ with atomic adds to dQ (fewer recomputed exps, fp32 dQ scratch)", True, ""),
        ("bf16 training", DEVICE.supports_bf16(), "needs sm_80+; the interpreter has no bf16"),
        ("dropout inside the kernel, regenerated from a seed in the backward (tl.rand)", True, ""),
        ("a torch.library custom op, so that torch.compile can trace through it", True, ""),
    ]
    explain_extensions(rows)
