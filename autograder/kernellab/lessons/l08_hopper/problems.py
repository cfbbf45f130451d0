"""Lesson 08: Hopper - TMA tile loads and a persistent matmul, misaligned shapes, FP8 with scales, and
FlashAttention's forward with TMA and warp specialisation. Correctness is graded everywhere (in the CPU
interpreter below sm_90); speed only on sm_90 and newer, where the hardware it is about exists."""
from __future__ import annotations

import torch

from ... import learner
from ...device import DEVICE
from ...problems.base import Answer, AnswersProblem, Case, CorrectnessProblem, SpeedProblem
from ..attention import HINTS as ATTENTION_HINTS, attention_flops, attention_reference, forward_case, qkv, sdpa_on
from ..attention import LSE_FLOOR
from ..attention import shapes as attention_shapes
# the same fp16 matmul as lesson 02: its operands, timed inputs, sampled reference, bytes and FLOPs
from ..l02_tiled_matmul.problems import _matmul_at, _mm_bytes, _mm_flops, _operand, _randn_matmul

LESSON = "08_hopper"
HOPPER = (9, 0)
TMA_ALIGN = 16  # bytes: TMA's rule for the base address and every stride but the last (which must be 1)


def legal_row_length(cols: int, itemsize: int) -> int:
    """The shortest row (in elements) of at least ``cols`` elements whose bytes are a multiple of 16."""
    per16 = TMA_ALIGN // itemsize
    return -(-cols // per16) * per16


def pad_bytes(rows: int, cols: int, itemsize: int) -> int:
    """What copying a (rows, cols) operand into legal rows moves: each element read once and written once (the
    extra columns are never written: the descriptor's shape stops at ``cols`` and TMA fills past it with zeros)."""
    return 2 * rows * cols * itemsize


def tma_legal(t: torch.Tensor) -> bool:
    """Whether a TMA descriptor may describe ``t`` as it is: last stride 1, every other stride and the start
    address multiples of 16 bytes."""
    es = t.element_size()
    return (t.stride(-1) == 1 and all(s * es % TMA_ALIGN == 0 for s in t.stride()[:-1])
            and t.data_ptr() % TMA_ALIGN == 0)


# ------------------------------------------------------------------ numeric answers: TMA's 16-byte rule
ANSWER_SHAPE = {"M": 3000, "N": 5000, "K": 1500}  # the shape where the course's lesson 02 matmul fell to 0.36x cuBLAS


def _tma_answers(facts):
    M, K = ANSWER_SHAPE["M"], ANSWER_SHAPE["K"]
    return [
        Answer("ROW_BYTES", K * 2, explain=(
            "The stride between rows of A, in bytes: a row's length times the size of one fp16 value.")),
        Answer("PADDED_K", legal_row_length(K, 2), explain=(
            "The smallest row length (in elements) at or above K whose rows are a multiple of 16 bytes: how many "
            "fp16 values make 16 bytes?")),
        Answer("PAD_BYTES", pad_bytes(M, K, 2), explain=(
            "Padding copies A once into rows of PADDED_K: count what the copy reads and what it writes (the extra "
            "columns are never written or read: the descriptor's shape stops at K, and TMA fills past it with "
            "zeros).")),
        Answer("FP8_K_MULTIPLE", TMA_ALIGN, explain="An e4m3 value is 1 byte: apply PADDED_K's row "
                                                    "rule to it (torch._scaled_mm asks the same)."),
    ]


TMA_ANSWERS = AnswersProblem("answers_tma", 2, ("ROW_BYTES", "PADDED_K", "PAD_BYTES", "FP8_K_MULTIPLE"),
                             "TMA's 16-byte rule, in bytes", answers=_tma_answers)


# ------------------------------------------------------------------ the persistent TMA matmul
def _mm_case(gen, m, n, k) -> Case:
    tags = [t for t, on in (("k_misaligned", (k * 2) % TMA_ALIGN), ("n_misaligned", (n * 2) % TMA_ALIGN),
                            ("m_tail", m % 128), ("tiny", max(m, n, k) < 16)) if on]
    return Case(f"M={m}, N={n}, K={k}" + (" (rows of A not 16-byte multiples)" if (k * 2) % TMA_ALIGN else "")
                + (" (rows of B and C not 16-byte multiples)" if (n * 2) % TMA_ALIGN else ""),
                [_operand(m, k, gen), _operand(k, n, gen)], tags=tuple(tags))


def _mm_cases(gen, on_gpu):
    big = 1024 if on_gpu else 128
    fixed = [(big, big, big), (big + 3, big, big), (37, 53, 71), (big, big, 1500 if on_gpu else 150),
             (big, big - 3, big), (1, 8, 8), (5, 3, 2), (300, 200, 64)]
    hi = 2048 if on_gpu else 200
    rand = [tuple(int(torch.randint(1, hi, (1,), generator=gen)) for _ in range(3)) for _ in range(2)]
    return [_mm_case(gen, *s) for s in fixed + rand]


MATMUL_HINTS = {
    "k_misaligned": ("It fails only when K * 2 bytes is not a multiple of 16: a descriptor over A then breaks TMA's "
                     "rule (every stride but the last a multiple of 16 bytes; the interpreter says 'stride must be "
                     "16-byte aligned'). Give A rows of a legal length first (pad K up to a multiple of 8), or take a "
                     "path without TMA for such inputs."),
    "n_misaligned": ("It fails only when N * 2 bytes is not a multiple of 16: B's rows and C's rows break TMA's "
                     "16-byte rule. Pad B like A, and write C into a buffer with legal rows, returning the view of "
                     "its first N columns."),
    "m_tail": ("It fails only when M is not a multiple of the block: TMA fills rows past the descriptor's shape with "
               "zeros and drops stores past it, so give the descriptor the true M, not a rounded one."),
    "tiny": ("It fails only on tiny shapes (a dimension under 16): a descriptor's block may be larger than the "
             "tensor, but its shape must be the tensor's true shape."),
}


def _out_shape(case):
    return case.inputs[0].shape[0], case.inputs[1].shape[1]


MATMUL = CorrectnessProblem(
    "tma_matmul_correct", 4, ("matmul",), "matmul(a, b) with TMA, at odd and misaligned shapes",
    signature="matmul(a, b)", make_cases=_mm_cases, reference=lambda c: c.inputs[0].double() @ c.inputs[1].double(),
    out_dtype=lambda c: torch.float16, out_shape=_out_shape, hints=MATMUL_HINTS, min_capability=HOPPER)


# ------------------------------------------------------------------ FP8
def _scales(gen, device="cpu"):
    # products of the two scales between 0.01 and 0.2: a scale applied twice, or not at all, is off by 5x or more
    return (torch.empty(1, device=device).uniform_(0.02, 0.1, generator=gen),
            torch.empty(1, device=device).uniform_(0.5, 2.0, generator=gen))


def _fp8_case(gen, m, n, k) -> Case:
    a = (torch.randn(m, k, generator=gen) * 4).to(torch.float8_e4m3fn)
    b_t = (torch.randn(n, k, generator=gen) * 4).to(torch.float8_e4m3fn)
    sa, sb = _scales(gen)
    return Case(f"M={m}, N={n}, K={k}, scales {sa.item():.3g} and {sb.item():.3g}", [a, b_t, sa, sb],
                tags=("m_tail",) if m % 128 else ())


def _fp8_cases(gen, on_gpu):
    big = 1024 if on_gpu else 128
    fixed = [(big, big, big), (big + 5, big, big), (37, 48, 64), (1, 16, 16), (200, 64, 512 if on_gpu else 256)]
    hi = 2048 if on_gpu else 160
    rand = [(int(torch.randint(1, hi, (1,), generator=gen)), 16 * int(torch.randint(1, hi // 16, (1,), generator=gen)),
             16 * int(torch.randint(1, hi // 16, (1,), generator=gen))) for _ in range(2)]
    return [_fp8_case(gen, *s) for s in fixed + rand]


def fp8_reference(c) -> torch.Tensor:
    a, b_t, sa, sb = c.inputs
    return (a.double() @ b_t.double().t()) * (sa.double() * sb.double())


FP8_HINTS = {"m_tail": MATMUL_HINTS["m_tail"]}
FP8 = CorrectnessProblem(
    "fp8_matmul_correct", 3, ("fp8_matmul",), "fp8_matmul(a, b_t, scale_a, scale_b)",
    signature="fp8_matmul(a, b_t, scale_a, scale_b)", make_cases=_fp8_cases, reference=fp8_reference,
    out_dtype=lambda c: torch.bfloat16, out_shape=lambda c: (c.inputs[0].shape[0], c.inputs[1].shape[0]),
    hints=FP8_HINTS, min_capability=HOPPER,
    mistakes=((lambda c: fp8_reference(c) * (c.inputs[2].double() * c.inputs[3].double()),
               "This is the product with the scales applied twice (scale_a * scale_b squared): multiply the "
               "accumulator by scale_a * scale_b once, in the epilogue, and not the inputs too."),
              (lambda c: c.inputs[0].double() @ c.inputs[1].double().t(),
               "This is the product of the raw FP8 values, without the scales: an e4m3 value times its tensor's "
               "scale is the real number it stands for. Multiply the accumulator by scale_a * scale_b."),
              (lambda c: c.inputs[0].double() @ c.inputs[1].double().t() * c.inputs[2].double(),
               "Only scale_a was applied: the result needs scale_a * scale_b."),
              (lambda c: c.inputs[0].double() @ c.inputs[1].double().t() * c.inputs[3].double(),
               "Only scale_b was applied: the result needs scale_a * scale_b.")))


# ------------------------------------------------------------------ attention with TMA
def _attn_cases(gen, on_gpu):
    # lesson 04's cases; in the interpreter (slow) those that test what descriptors change: one query row, a
    # short causal sequence, key tails at every head dim up to 128, strided views, and one random shape
    shapes = attention_shapes(gen, on_gpu)
    return [forward_case(gen, *s) for s in (shapes if on_gpu else [shapes[i] for i in (0, 1, 4, 5, 6, 7, -1)])]


ATTENTION = CorrectnessProblem(
    "tma_attention_correct", 3, ("tma_attention",), "tma_attention(q, k, v, causal)",
    signature="tma_attention(q, k, v, causal)", make_cases=_attn_cases,
    reference=lambda c: attention_reference(*c.inputs),
    out_dtype=lambda c: (torch.float16, torch.float32),
    out_shape=lambda c: (tuple(c.inputs[0].shape), tuple(c.inputs[0].shape[:3])),
    hints={**ATTENTION_HINTS, "strided": ("It fails only on the (B, N, H, D) views: a 4-D descriptor takes the "
                                          "tensor's own strides (q.stride()), not ones computed from its shape.")},
    outputs=("output", "lse"), norm_floor=LSE_FLOOR, min_capability=HOPPER)


# ------------------------------------------------------------------ speed (sm_90 and newer)
MM_SHAPE = (4096, 4096, 4096)
MISALIGNED_SHAPE = (3000, 5000, 1500)  # M, N, K: K * 2 = 3000 bytes, not a multiple of 16
FP8_SHAPE = (4096, 4096, 4096)
ATTENTION_SHAPE = (4, 32, 4096, 128, False)


def _speed_mm(pid, shape, title, bands):
    return SpeedProblem(pid, 2, ("matmul",), title, signature="matmul(a, b)", make_inputs=_randn_matmul(*shape),
                        baseline=torch.matmul, baseline_name="torch.matmul (cuBLAS)", reference_at=_matmul_at,
                        bytes_moved=_mm_bytes, flops=_mm_flops, metric="speedup", bands=bands,
                        out_dtype=lambda inp: torch.float16, precheck=MATMUL, min_capability=HOPPER)


MATMUL_SPEED = _speed_mm("tma_matmul_speed", MM_SHAPE, "matmul: speed vs cuBLAS at 4096^3",
                         ((0.95, 1.0), (0.85, 0.6), (0.7, 0.3)))
MISALIGNED_SPEED = _speed_mm("misaligned_speed", MISALIGNED_SHAPE, "matmul: speed vs cuBLAS at 3000 x 5000 x 1500",
                             ((1.5, 1.0), (1.0, 0.6), (0.8, 0.3)))


def _fp8_inputs(m, n, k):
    def make(gen, device):
        a = (torch.randn(m, k, generator=gen, device=device) * 4).to(torch.float8_e4m3fn)
        b_t = (torch.randn(n, k, generator=gen, device=device) * 4).to(torch.float8_e4m3fn)
        sa, sb = _scales(gen, device)
        return [a, b_t, sa, sb]
    return make


def scaled_mm(a, b_t, scale_a, scale_b):
    """The baseline: PyTorch's FP8 matmul (cuBLASLt), per-tensor scales, bf16 out. It wants B column-major:
    b_t.t() of a row-major (N, K) tensor is exactly that."""
    return torch._scaled_mm(a, b_t.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)


def _fp8_at(inputs, idx):
    a, b_t, sa, sb = inputs
    i, j = idx // b_t.shape[0], idx % b_t.shape[0]
    return (a[i].double() * b_t[j].double()).sum(dim=1) * (sa.double() * sb.double()).item()


def _fp8_bytes(inputs):
    a, b_t = inputs[0], inputs[1]
    return a.numel() + b_t.numel() + 2 * a.shape[0] * b_t.shape[0]


FP8_SPEED = SpeedProblem(
    "fp8_speed", 2, ("fp8_matmul",), "fp8_matmul: speed vs torch._scaled_mm at 4096^3",
    signature="fp8_matmul(a, b_t, scale_a, scale_b)", make_inputs=_fp8_inputs(*FP8_SHAPE), baseline=scaled_mm,
    baseline_name="torch._scaled_mm (cuBLASLt FP8)", reference_at=_fp8_at, bytes_moved=_fp8_bytes,
    flops=lambda inp: 2 * inp[0].shape[0] * inp[0].shape[1] * inp[1].shape[0], metric="speedup",
    bands=((0.95, 1.0), (0.85, 0.6), (0.7, 0.3)), out_dtype=lambda inp: torch.bfloat16, precheck=FP8,
    min_capability=HOPPER, flop_rate=2.0)


def attention_cudnn(q, k, v, causal=False):
    """SDPA held to its cuDNN backend: on Hopper, cuDNN's attention uses TMA and warp specialisation too."""
    from torch.nn.attention import SDPBackend
    return sdpa_on(SDPBackend.CUDNN_ATTENTION)(q, k, v, causal)


def _attn_inputs(gen, device):
    B, H, N, D, causal = ATTENTION_SHAPE
    return [*qkv(gen, B, H, N, D, device=device), causal]


def _attn_reference(inputs):
    q, k, v, causal = inputs
    return attention_reference(q, k, v, causal, dtype=torch.float32)[0]


ATTENTION_SPEED = SpeedProblem(
    "tma_attention_speed", 2, ("tma_attention",), "tma_attention: speed vs SDPA's cuDNN backend",
    signature="tma_attention(q, k, v, causal)", make_inputs=_attn_inputs, baseline=attention_cudnn,
    baseline_name="SDPA, cuDNN backend", reference_full=_attn_reference, sketch_of=lambda out: out[0],
    bytes_moved=lambda inp: 4 * inp[0].numel() * 2, flops=lambda inp: attention_flops(*inp[0].shape, inp[3]),
    bands=((0.95, 1.0), (0.75, 0.6), (0.6, 0.3)), out_dtype=lambda inp: torch.float16, precheck=ATTENTION,
    min_capability=HOPPER)

PROBLEMS = [TMA_ANSWERS, MATMUL, MATMUL_SPEED, MISALIGNED_SPEED, FP8, FP8_SPEED, ATTENTION, ATTENTION_SPEED]



# ------------------------------------------------------------------ what the notebook calls
check_answers_tma = learner.checker(TMA_ANSWERS)
check_matmul = learner.checker(MATMUL)
check_matmul_speed = learner.checker(MATMUL_SPEED)
check_misaligned_speed = learner.checker(MISALIGNED_SPEED)
check_fp8_matmul = learner.checker(FP8)
check_fp8_speed = learner.checker(FP8_SPEED)
check_tma_attention = learner.checker(ATTENTION)
check_tma_attention_speed = learner.checker(ATTENTION_SPEED)


def where_this_runs() -> None:
    """What this machine can run and grade in this lesson, and why."""
    if DEVICE.on_gpu:
        print(f"{DEVICE.name} ({DEVICE.cc}): TMA, warp specialisation and FP8 tensor cores are here; every check "
              "is graded, speed included.")
        return
    from ..._env import _too_old
    if _too_old():
        cc = "sm_{}{}".format(*torch.cuda.get_device_capability(0))
        print(f"This GPU is {cc}: it has no TMA (sm_90) or FP8 tensor cores of Hopper's kind, so the kernels run in "
              "Triton's CPU interpreter, with small shapes. Correctness is checked and graded; speed is not "
              "(Colab's T4, L4 and A100 are all older than sm_90).")
    else:
        print("No GPU: the kernels run in Triton's CPU interpreter, with small shapes. It builds tensor descriptors "
              "and checks TMA's 16-byte rule as the hardware would; it runs warp_specialize loops as plain loops "
              "and FP8 dots in software. Correctness is checked and graded; speed is not.")


def pad_cost(m: int = MISALIGNED_SHAPE[0], k: int = MISALIGNED_SHAPE[2], n: int = MISALIGNED_SHAPE[1]) -> dict:
    """What padding A costs next to the matmul it unlocks, counted (and timed on a GPU)."""
    padded_k = legal_row_length(k, 2)
    copy_bytes = pad_bytes(m, k, 2)
    flops = 2 * m * n * k
    out = {"copy_bytes": copy_bytes, "matmul_flops": flops}
    print(f"A is {m} x {k} fp16: rows of {k * 2} bytes ({'' if k * 2 % 16 == 0 else 'not '}a multiple of 16).")
    print(f"Padding to K = {padded_k}: {copy_bytes / 1e6:.1f} MB moved once, against {flops / 1e9:.1f} GFLOP of matmul.")
    if DEVICE.on_gpu:
        from ...timing import bench
        a = torch.randn(m, k, device="cuda").half()
        dst = torch.empty(m, padded_k, device="cuda", dtype=torch.float16)
        ms = bench(lambda: dst[:, :k].copy_(a))
        out["copy_ms"] = ms
        print(f"On this GPU the copy takes {ms * 1e3:.1f} us ({copy_bytes / ms / 1e6:.0f} GB/s).")
    return out


def fp8_error(fp8_matmul=None) -> dict:
    """How far an FP8 matmul lands from the fp64 product of the *original* fp16 values: quantisation error
    (choosing the scale, rounding to e4m3) next to the kernel's own error (accumulation, the bf16 output)."""
    gen = torch.Generator().manual_seed(0)
    m = n = k = 512 if DEVICE.on_gpu else 64
    a16, b16 = torch.randn(m, k, generator=gen).half(), torch.randn(n, k, generator=gen).half()
    sa, sb = a16.abs().max().float() / 448, b16.abs().max().float() / 448  # e4m3's largest finite value is 448
    a8, b8 = (a16.float() / sa).to(torch.float8_e4m3fn), (b16.float() / sb).to(torch.float8_e4m3fn)
    exact = a16.double() @ b16.double().t()
    quantised = (a8.double() @ b8.double().t()) * (sa.double() * sb.double())
    rel = lambda x, y: (torch.linalg.vector_norm(x - y) / torch.linalg.vector_norm(y)).item()
    out = {"quantisation": rel(quantised, exact)}
    print(f"quantising to e4m3 with per-tensor scales: {out['quantisation']:.2e} relative error")
    if fp8_matmul is not None:
        dev = DEVICE.torch_device
        got = fp8_matmul(a8.to(dev), b8.to(dev), sa.reshape(1).to(dev), sb.reshape(1).to(dev))
        out["kernel"] = rel(got.cpu().double(), quantised)
        print(f"your kernel against the exact product of the e4m3 values: {out['kernel']:.2e} "
              "(bf16 output rounding and the tensor cores' accumulation)")
    return out


def warp_timeline(**kw):
    """Serial, pipelined and warp-specialised schedules of one program's tiles, side by side."""
    from .widgets import warp_timeline as _timeline
    return _timeline(**kw)


SWEEP_SHAPES = (2048, 4096, 8192, MISALIGNED_SHAPE, (4095, 4097, 4093))


def matmul_sweep(matmul, plot: bool = True) -> list[dict]:
    """TFLOP/s of your matmul and cuBLAS on squares and on shapes whose rows break the 16-byte rule (GPU only),
    timed like every sweep of the course (sweeps.matmul_sweep)."""
    if not DEVICE.on_gpu:
        print("No Hopper GPU here: the sweep needs one. assets/bench/lesson08.md has one measured on an H100.")
        return []
    from ...sweeps import matmul_sweep as sweep, plot_shape_bars
    rows = sweep({"yours": matmul, "cuBLAS": torch.matmul}, SWEEP_SHAPES)
    for r in rows:
        print(f"{r['shape']:>16}: yours {r['yours_tflops']:6.0f} TFLOP/s, cuBLAS {r['cuBLAS_tflops']:6.0f}")
    if plot:
        import matplotlib.pyplot as plt
        plot_shape_bars(rows, f"fp16 matmul on {DEVICE.name}")
        plt.show()
    return rows


def going_further() -> None:
    from ...device import explain_extensions
    cap = DEVICE.capability or (0, 0)
    explain_extensions([
        ("the backward pass with descriptors (lesson 05's kernels, loads through TMA)", cap >= HOPPER, "needs sm_90"),
        ("per-block FP8 scales (one scale per 128 x 128 tile, as DeepSeek-V3 trains)", cap >= HOPPER, "needs sm_90"),
        ("Blackwell's tcgen05 MMA and tensor memory (Triton picks them on sm_100)", cap >= (10, 0), "needs sm_100"),
    ])
