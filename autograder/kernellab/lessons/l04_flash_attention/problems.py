"""Lesson 04: FlashAttention forward - tiles, the online softmax on a matrix, causal masking, and the
log-sum-exp kept for the backward pass."""
from __future__ import annotations

import torch

from ... import learner
from ...device import DEVICE
from ...problems.base import Answer, AnswersProblem, CorrectnessProblem, SpeedProblem
from ..attention import (HINTS, LSE_FLOOR, attention_flops, attention_naive, attention_reference, attention_sdpa,
                        attention_sdpa_flash, forward_case,
                        peak_extra_bytes, qkv, shapes)

LESSON = "04_flash_attention"


# ------------------------------------------------------------------ numeric answers: what the N x N matrix costs
ANSWER_SHAPE = {"B": 4, "H": 32, "N": 16384, "D": 128, "BLOCK_M": 128}


def _memory_answers(facts):
    B, H, N, D, bm = (ANSWER_SHAPE[k] for k in ("B", "H", "N", "D", "BLOCK_M"))
    return [
        Answer("SCORES_BYTES", B * H * N * N * 2, explain=(
            "One score per (query, key) pair, in every head of every batch: count them, and the bytes of one "
            "fp16 value.")),
        Answer("LSE_BYTES", B * H * N * 4, explain=(
            "The log-sum-exp keeps one float32 per query row: how many query rows are there in all heads and "
            "batches?")),
        Answer("ATTN_FLOPS", attention_flops(B, H, N, D, False),
               explain=("Count the matmuls in one head's forward and the FLOPs of each (a multiply-add is 2), then "
                        "all heads and batches.")),
        Answer("KV_READS", N // bm, explain=(
            "Every program (one block of BLOCK_M query rows) streams all of K and V once: how many programs "
            "does one head have?")),
    ]


MEMORY_ANSWERS = AnswersProblem("answers_memory", 2, ("SCORES_BYTES", "LSE_BYTES", "ATTN_FLOPS", "KV_READS"),
                                "what the N x N matrix costs", answers=_memory_answers)


# ------------------------------------------------------------------ correctness
def _cases(gen, on_gpu):
    return [forward_case(gen, *s) for s in shapes(gen, on_gpu)]


def _reference(case):
    return attention_reference(*case.inputs)


def _out_dtype(case):
    return torch.float16, torch.float32


def _out_shape(case):
    q = case.inputs[0]
    return tuple(q.shape), tuple(q.shape[:3])


FLASH = CorrectnessProblem(
    "flash_attention_correct", 5, ("flash_attention",), "flash_attention(q, k, v, causal)",
    signature="flash_attention(q, k, v, causal)", make_cases=_cases, reference=_reference,
    out_dtype=_out_dtype, out_shape=_out_shape, hints=HINTS, outputs=("output", "lse"), norm_floor=LSE_FLOOR)


def _memory_cases(gen, on_gpu):
    B, H, N, D = (1, 4, 4096, 64) if on_gpu else (1, 2, 512, 16)
    return [forward_case(gen, B, H, N, D, False, "bhnd"), forward_case(gen, B, H, N - 3, D, True, "bhnd")]


def _extra_allowed(case):
    """Two float32 copies of q: room for per-row statistics or an fp32 scratch, never for N x N."""
    return 2 * 4 * case.inputs[0].numel()


FLASH_MEMORY = CorrectnessProblem(
    "flash_attention_memory", 2, ("flash_attention",), "flash_attention: O(N) extra memory",
    signature="flash_attention(q, k, v, causal)", make_cases=_memory_cases, reference=_reference,
    out_dtype=_out_dtype, out_shape=_out_shape, hints=HINTS, outputs=("output", "lse"), norm_floor=LSE_FLOOR,
    max_extra_bytes=_extra_allowed,
    extra_bytes_why=("FlashAttention never materialises the N x N scores: besides the output and the lse it needs "
                     "no memory at all. Every torch allocation inside the call is counted (the checks serve them)."))


# ------------------------------------------------------------------ speed
NAIVE_SHAPE = (4, 8, 4096, 64, False)  # the naive scores: 1 GB in fp16, 2 GB in fp32 - fits a T4
SDPA_SHAPE = (4, 16, 4096, 64, True)


def _inputs_of(shape):
    B, H, N, D, causal = shape

    def make(gen, device):
        return [*qkv(gen, B, H, N, D, device=device), causal]
    return make


def _reference_output(inputs):
    q, k, v, causal = inputs
    return attention_reference(q, k, v, causal, dtype=torch.float32)[0]


def _bytes(inputs):
    q = inputs[0]
    return 4 * q.numel() * q.element_size() + q[..., 0].numel() * 4


def _flops(inputs):
    q, causal = inputs[0], inputs[3]
    return attention_flops(*q.shape, causal)


def _speed(pid, shape, baseline, name, bands):
    return SpeedProblem(pid, 2, ("flash_attention",), f"flash_attention: speed vs {name}",
                        signature="flash_attention(q, k, v, causal)", make_inputs=_inputs_of(shape),
                        baseline=baseline, baseline_name=name, reference_full=_reference_output,
                        sketch_of=lambda out: out[0], bytes_moved=_bytes, flops=_flops, bands=bands,
                        out_dtype=lambda inputs: torch.float16, precheck=FLASH)


SPEED_NAIVE = _speed("flash_speed_naive", NAIVE_SHAPE, attention_naive, "naive attention",
                     ((4.0, 1.0), (2.5, 0.6), (1.5, 0.3)))
SPEED_SDPA = _speed("flash_speed_sdpa", SDPA_SHAPE, attention_sdpa_flash, "SDPA's flash backend",
                    ((1.0, 1.0), (0.75, 0.6), (0.5, 0.3)))

PROBLEMS = [MEMORY_ANSWERS, FLASH, FLASH_MEMORY, SPEED_NAIVE, SPEED_SDPA]



# ------------------------------------------------------------------ what the notebook calls
check_answers_memory = learner.checker(MEMORY_ANSWERS)
check_flash_attention = learner.checker(FLASH)
check_flash_attention_memory = learner.checker(FLASH_MEMORY)
check_flash_speed_naive = learner.checker(SPEED_NAIVE)
check_flash_speed_sdpa = learner.checker(SPEED_SDPA)


def program_visits(n_ctx: int, block_m: int, block_n: int, causal: bool, program: int) -> list[dict]:
    """The key blocks one program (query rows program*block_m ...) visits, in order, the way the solution
    splits its loop: blocks wholly visible need no mask; the diagonal block (causal) and the last, partial
    block need one; blocks above the diagonal are skipped."""
    first_row = program * block_m
    last_row = min(first_row + block_m, n_ctx) - 1
    out = []
    for j in range((n_ctx + block_n - 1) // block_n):
        lo, hi = j * block_n, min((j + 1) * block_n, n_ctx) - 1
        if causal and lo > last_row:
            kind = "skipped"
        elif (causal and hi > first_row) or hi - lo + 1 < block_n:
            kind = "masked"
        else:
            kind = "full"
        out.append({"block": j, "rows": (first_row, last_row), "keys": (lo, hi), "kind": kind})
    return out


def tile_steps(n_ctx: int = 1000, block_m: int = 128, block_n: int = 64, causal: bool = True):
    """Step through the tiles of the N x N score matrix one program visits (ipywidgets)."""
    from .widgets import attention_tiles
    return attention_tiles(program_visits, n_ctx, block_m, block_n, causal)


def naive_memory(Ns=(1024, 2048, 4096, 8192, 16384, 32768), B: int = 1, H: int = 16, D: int = 64) -> list[dict]:
    """Peak extra memory of naive attention as N grows, until the GPU runs out (GPU only)."""
    rows = []
    for N in Ns:
        scores = B * H * N * N * 2
        row = {"N": N, "scores_gb": scores / 1e9}
        if DEVICE.on_gpu:
            q, k, v = qkv(torch.Generator("cuda").manual_seed(N), B, H, N, D, device="cuda")
            peak = peak_extra_bytes(attention_naive, q, k, v)
            row["naive_gb"] = None if peak is None else peak / 1e9
            del q, k, v
        rows.append(row)
        got = row.get("naive_gb", "n/a")
        print(f"N = {N:>6}: the scores alone are {scores / 1e9:7.2f} GB; naive attention's peak: "
              + ("out of memory" if got is None else got if isinstance(got, str) else f"{got:.2f} GB"))
    if not DEVICE.on_gpu:
        print("No GPU: only the arithmetic is shown. (On an H100 with 80 GB, naive attention ran out of memory "
              "at N = 32768 for B=1, H=16.)")
    return rows


def attention_contenders(flash_attention, name: str = "yours") -> dict:
    return {name: lambda q, k, v, c: flash_attention(q, k, v, c)[0], "SDPA flash": attention_sdpa_flash,
            "SDPA default": attention_sdpa, "naive": attention_naive}


def attention_sweep(flash_attention, Ns=(512, 1024, 2048, 4096, 8192, 16384), B: int = 4, H: int = 16, D: int = 64,
                    causal: bool = False, plot: bool = True) -> list[dict]:
    """TFLOP/s against N: yours, SDPA and naive attention (naive until it runs out of memory; GPU only)."""
    if not DEVICE.on_gpu:
        print("No GPU: the sweep needs one. assets/bench/lesson04_tflops.png shows an H100's.")
        return []
    import sys

    from tqdm.auto import tqdm

    from ...sweeps import time_contenders
    rows = []
    for N in tqdm(list(Ns), desc="N", file=sys.stdout):
        q, k, v = qkv(torch.Generator("cuda").manual_seed(N), B, H, N, D, device="cuda")
        fns = attention_contenders(flash_attention)
        if B * H * N * N * 6 > 0.5 * torch.cuda.mem_get_info()[0]:
            fns.pop("naive")
        t = time_contenders(fns, [q, k, v, causal], rounds=1)
        fl = attention_flops(B, H, N, D, causal)
        rows.append({"N": N} | {f"{n}_tflops": fl / (t[f"{n}_ms"] * 1e-3) / 1e12 for n in fns})
    if plot:
        import matplotlib.pyplot as plt

        from ...sweeps import plot_series
        plot_series([r | {"naive_tflops": r.get("naive_tflops", float("nan"))} for r in rows], "N", "_tflops",
                    "sequence length N", "TFLOP/s (4 B H N^2 D" + (" / 2" if causal else "") + ")",
                    f"attention B={B} H={H} D={D}{' causal' if causal else ''} on {DEVICE.name}")
        plt.show()
    return rows


def memory_sweep(flash_attention, Ns=(1024, 2048, 4096, 8192, 16384, 32768), B: int = 1, H: int = 16, D: int = 64,
                 plot: bool = True) -> list[dict]:
    """Peak extra memory against N: yours, SDPA, naive (GPU only; a missing point ran out of memory)."""
    if not DEVICE.on_gpu:
        print("No GPU: peak memory is measured with the CUDA allocator. assets/bench/lesson04_memory.png shows an "
              "H100's.")
        return []
    rows = []
    for N in Ns:
        q, k, v = qkv(torch.Generator("cuda").manual_seed(N), B, H, N, D, device="cuda")
        row = {"N": N}
        for name, fn in attention_contenders(flash_attention).items():
            peak = peak_extra_bytes(fn, q, k, v, False)
            row[f"{name}_mb"] = float("nan") if peak is None else peak / 1e6
        rows.append(row)
        del q, k, v
    if plot:
        import matplotlib.pyplot as plt

        from ...sweeps import plot_series
        ax = plot_series(rows, "N", "_mb", "sequence length N", "peak extra memory (MB)",
                         f"memory of one attention call, B={B} H={H} D={D}, on {DEVICE.name}")
        ax.set_yscale("log")
        plt.show()
    return rows


def roofline(flash_attention=None):
    """Time the kernel once more (GPU), record it and draw the roofline with every point so far."""
    from ...roofline import measure_point, plot_roofline
    if flash_attention is not None:
        B, H, N, D = (4, 16, 4096, 64) if DEVICE.on_gpu else (1, 2, 256, 64)
        q, k, v = qkv(torch.Generator(DEVICE.torch_device).manual_seed(0), B, H, N, D, device=DEVICE.torch_device)
        measure_point("flash attention fwd", flash_attention, [q, k, v, False], attention_flops(B, H, N, D, False),
                      4 * q.numel() * 2)
    return plot_roofline()


def going_further() -> None:
    """Which ungraded extensions this GPU can run, and why the others are skipped."""
    from ...device import explain_extensions
    cc = DEVICE.capability or (0, 0)
    rows = [
        ("bf16 attention (same kernel, bf16 in and out)", DEVICE.supports_bf16(), "needs sm_80+; the interpreter has no bf16"),
        ("grouped-query attention: several query heads share one K/V head", True, ""),
        ("FP8 Q and K for the first matmul", DEVICE.on_gpu and cc >= (8, 9), "needs sm_89+ (Ada, Hopper)"),
        ("TMA loads (tensor descriptors) and warp specialisation", DEVICE.on_gpu and cc >= (9, 0), "needs sm_90+"),
        ("variable-length sequences packed in one batch (cumulative offsets)", True, ""),
    ]
    explain_extensions(rows)
