"""Lesson 02: tiled matmul - reuse, masks, strides, program order, autotuning, a fused epilogue."""
from __future__ import annotations

import math

import torch

from ... import learner
from ...device import DEVICE
from ...problems.base import (Answer, AnswersProblem, Case, CorrectnessProblem, FunctionProblem,
                             SpeedProblem)
from ...report import CheckFailed, say
from ..answers import bound, follow_on, intensity

LESSON = "02_tiled_matmul"

# ------------------------------------------------------------------ numeric answers: reuse
REUSE_N = 4096
REUSE_TILE = 128


def _reuse_answers(facts):
    n, t = REUSE_N, REUSE_TILE
    flops = 2 * n ** 3
    naive = 2 * n * n * (2 * n) + 2 * n * n
    tiled = (n // t) ** 2 * (2 * t * n) * 2 + 2 * n * n
    return [
        Answer("NAIVE_BYTES", naive, explain=(
            "Without reuse every output element reads its own row of A and column of B from DRAM and is written "
            "once: count the bytes for one output element, then multiply by the number of outputs.")),
        Answer("TILED_BYTES", tiled, explain=(
            "Count the programs when each computes a 128-by-128 tile of C, then what one program reads from "
            "DRAM (which strips of A and B, how long?), and add C written once.")),
        Answer("TILED_INTENSITY", flops / tiled, rel_tol=0.03,
               explain="The matmul's FLOPs (lesson 01) per byte of TILED_BYTES."),
        Answer("TILED_BOUND", facts["bound"](flops / tiled), explain=(
            "Compare TILED_INTENSITY with this GPU's ridge point: if every tile came from DRAM, which "
            "ceiling would bind?")),
    ]


REUSE = AnswersProblem("answers_reuse", 2, ("NAIVE_BYTES", "TILED_BYTES", "TILED_INTENSITY", "TILED_BOUND"),
                       "matmul bytes, naive vs tiled", answers=_reuse_answers,
                       judge=follow_on({"TILED_INTENSITY": intensity(2 * REUSE_N ** 3, "TILED_BYTES"),
                                        "TILED_BOUND": bound("TILED_INTENSITY")}))


# ------------------------------------------------------------------ program id -> tile
def grouped_tile(pid: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[int, int]:
    """Reference order: groups of ``group_m`` tile rows, walked column by column inside a group."""
    per_group = group_m * num_pid_n
    first_m = (pid // per_group) * group_m
    rows = min(num_pid_m - first_m, group_m)
    return first_m + (pid % per_group) % rows, (pid % per_group) // rows


def row_major_tile(pid: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[int, int]:
    """The plain order: tile rows one after another (what GROUP_M = 1 gives too)."""
    return pid // num_pid_n, pid % num_pid_n


def _tile_grids(gen: torch.Generator):
    fixed = [(1, 1, 1), (4, 3, 2), (8, 8, 8), (13, 7, 4), (5, 9, 8), (3, 50, 1), (32, 32, 8)]
    rand = [tuple(int(torch.randint(lo, hi, (1,), generator=gen)) for lo, hi in ((1, 40), (1, 40), (1, 10)))
            for _ in range(2)]
    return [(f"grid {m} x {n} tiles, GROUP_M = {g}", [(p, m, n, g) for p in range(m * n)])
            for m, n, g in fixed + rand]


def _diagnose_tiles(label, calls, got, want) -> str:
    _, m, n, g = calls[0]
    wrong = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    if wrong and m % g and min(wrong) >= ((m - 1) // g) * g * n:
        return ("Only the last group is wrong: when num_pid_m is not a multiple of GROUP_M, the last group "
                "has fewer rows - min(num_pid_m - first_pid_m, GROUP_M).")
    if sorted(got) != sorted(want):
        return ("Some tiles are computed twice and others never: every (pid_m, pid_n) with 0 <= pid_m < "
                "num_pid_m and 0 <= pid_n < num_pid_n must come out exactly once.")
    if got == [row_major_tile(p, m, n, g) for p in range(m * n)] and g > 1:
        return ("This is the row-major order. Group GROUP_M rows of tiles and walk down a group's columns "
                "first, so that a wave of programs shares strips of A and B.")
    return ""


TILE_OF = FunctionProblem(
    "tile_mapping", 2, ("tile_of",), "tile_of: grouped program order",
    signature="tile_of(pid, num_pid_m, num_pid_n, group_m)", make_cases=_tile_grids,
    reference=grouped_tile, diagnose=_diagnose_tiles)


# ------------------------------------------------------------------ matmul cases
def _align() -> int:
    """Sizes that are multiples of this are whole blocks for every block size a learner might pick."""
    return 256 if DEVICE.on_gpu else 128


def _operand(rows, cols, gen, cancel=False):
    if cancel:  # all-positive first half, all-negative second half: partial sums grow, then cancel
        sign = torch.where(torch.arange(cols) < cols // 2, 1.0, -1.0)
        return ((torch.rand(rows, cols, generator=gen) + 0.5) * sign).half()
    scale = float(torch.empty(1).uniform_(0.5, 2.0, generator=gen))
    return (torch.randn(rows, cols, generator=gen) * scale).half()


def _transposed(t: torch.Tensor) -> torch.Tensor:
    """Same values, column-major storage: a non-contiguous view, as x.t() of a row-major tensor gives."""
    return t.t().contiguous().t()


def mm_case(gen, m, n, k, a_t=False, b_t=False, long_k=False, with_bias=False) -> Case:
    a = _operand(m, k, gen, cancel=long_k)
    b = (torch.rand(k, n, generator=gen) + 0.5).half() if long_k else _operand(k, n, gen)
    al = _align()
    tags = [t for t, on in (("m_tail", m % al), ("n_tail", n % al), ("k_tail", k % al), ("a_transposed", a_t),
                            ("b_transposed", b_t), ("transposed", a_t or b_t), ("long_k", long_k)) if on]
    label = f"M={m}, N={n}, K={k}" + (", A transposed" if a_t else "") + (", B transposed" if b_t else "")
    label += ", long K whose partial sums cancel" if long_k else ""
    inputs = [_transposed(a) if a_t else a, _transposed(b) if b_t else b]
    if with_bias:
        inputs.append((torch.randn(n, generator=gen)).half())
    return Case(label, inputs, tags=tuple(tags))


def _matmul_cases(with_bias: bool):
    def make(gen, on_gpu):
        big = 1024 if on_gpu else 128
        fixed = [dict(m=big, n=big, k=big), dict(m=1, n=1, k=1), dict(m=37, n=53, k=71),
                 dict(m=big, n=big, k=big - 24), dict(m=big + 3, n=big, k=big), dict(m=big, n=big - 31, k=big),
                 dict(m=big, n=big, k=big, a_t=True), dict(m=big, n=big, k=big, b_t=True),
                 dict(m=64, n=64, k=4096 if on_gpu else 2048, long_k=True)]
        if with_bias:  # the epilogue is checked on fewer shapes: the matmul itself was checked above
            fixed = [fixed[i] for i in (0, 2, 3, 7)]
        hi = 2048 if on_gpu else 200
        rand = [dict(m=int(torch.randint(1, hi, (1,), generator=gen)), n=int(torch.randint(1, hi, (1,), generator=gen)),
                     k=int(torch.randint(1, hi, (1,), generator=gen)), a_t=bool(torch.randint(2, (1,), generator=gen)),
                     b_t=bool(torch.randint(2, (1,), generator=gen))) for _ in range(2)]
        return [mm_case(gen, with_bias=with_bias, **d) for d in fixed + rand]
    return make


MATMUL_HINTS = {
    "a_transposed": ("It is wrong only when A is transposed (a non-contiguous view): step through A with "
                     "a.stride(0) and a.stride(1) instead of assuming row-major storage."),
    "b_transposed": ("It is wrong only when B is transposed (a non-contiguous view): step through B with "
                     "b.stride(0) and b.stride(1) instead of assuming row-major storage."),
    "transposed": ("It is wrong only on transposed (non-contiguous) inputs: pass every stride to the kernel "
                   "(a.stride(0), a.stride(1), b.stride(0), b.stride(1)) and step through memory with them."),
    "long_k": ("Only the long-K case is wrong, where partial sums grow large before they cancel: that is "
               "fp16 accumulation losing the low bits. Accumulate in float32 (tl.zeros(..., dtype=tl.float32)) "
               "and convert to fp16 once, when storing."),
    "k_tail": ("It is wrong only when K is not a multiple of the block: mask the loads of the last K step "
               "with other=0.0, so the missing terms add nothing."),
    "m_tail": "It is wrong only when M is not a multiple of the block: mask rows >= M in the loads of A and the store of C.",
    "n_tail": "It is wrong only when N is not a multiple of the block: mask columns >= N in the loads of B and the store of C.",
}


def _out_shape(case):
    return (case.inputs[0].shape[0], case.inputs[1].shape[1])


def _fp16(case):
    return torch.float16


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh approximation (as in GPT-2's MLP)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


MATMUL = CorrectnessProblem(
    "matmul_correct", 4, ("matmul",), "matmul(a, b)", signature="matmul(a, b)",
    make_cases=_matmul_cases(False), reference=lambda c: c.inputs[0].double() @ c.inputs[1].double(),
    out_dtype=_fp16, out_shape=_out_shape, hints=MATMUL_HINTS)

EPILOGUE = CorrectnessProblem(
    "epilogue_correct", 3, ("matmul_bias_gelu",), "matmul_bias_gelu(a, b, bias)",
    signature="matmul_bias_gelu(a, b, bias)", make_cases=_matmul_cases(True),
    reference=lambda c: gelu_tanh(c.inputs[0].double() @ c.inputs[1].double() + c.inputs[2].double()),
    out_dtype=_fp16, out_shape=_out_shape, hints=MATMUL_HINTS)


# ------------------------------------------------------------------ speed
SPEED_N = 4096  # 137 GFLOP: ~0.2 ms on an H100, ~3-5 ms on a T4
EPILOGUE_SHAPE = (8192, 4096, 1024)  # M, N, K: short K, so the epilogue's bytes matter next to the math


def _randn_matmul(m, n, k, bias=False):
    def make(gen, device):
        out = [torch.randn(m, k, generator=gen, device=device).half(),
               torch.randn(k, n, generator=gen, device=device).half()]
        if bias:
            out.append(torch.randn(n, generator=gen, device=device).half())
        return out
    return make


def _entries(inputs, idx):
    """Rows of A and columns of B behind flat output indices ``idx``, in float64."""
    a, b = inputs[0], inputs[1]
    i, j = idx // b.shape[1], idx % b.shape[1]
    return (a[i].double() * b[:, j].t().double()).sum(dim=1), j


def _matmul_at(inputs, idx):
    return _entries(inputs, idx)[0]


def _epilogue_at(inputs, idx):
    dots, j = _entries(inputs, idx)
    return gelu_tanh(dots + inputs[2][j].double())


def _mm_bytes(inputs):
    a, b = inputs[0], inputs[1]
    return 2 * (a.numel() + b.numel() + a.shape[0] * b.shape[1])


def _mm_flops(inputs):
    return 2 * inputs[0].shape[0] * inputs[0].shape[1] * inputs[1].shape[1]


def matmul_bias_gelu_eager(a, b, bias):
    """What the fused kernel replaces: a matmul, then a bias add and a GELU, each a trip through memory."""
    return torch.nn.functional.gelu(torch.matmul(a, b) + bias, approximate="tanh")


MATMUL_SPEED = SpeedProblem(
    "matmul_speed", 2, ("matmul",), "matmul: speed vs cuBLAS", signature="matmul(a, b)",
    make_inputs=_randn_matmul(SPEED_N, SPEED_N, SPEED_N), baseline=torch.matmul,
    baseline_name="torch.matmul (cuBLAS)", reference_at=_matmul_at, bytes_moved=_mm_bytes, flops=_mm_flops,
    metric="speedup", bands=((0.7, 1.0), (0.55, 0.6), (0.4, 0.3)), out_dtype=lambda inp: torch.float16,
    precheck=MATMUL)

EPILOGUE_SPEED = SpeedProblem(
    "epilogue_speed", 2, ("matmul_bias_gelu",), "matmul_bias_gelu: fused vs eager",
    signature="matmul_bias_gelu(a, b, bias)", make_inputs=_randn_matmul(*EPILOGUE_SHAPE, bias=True),
    baseline=matmul_bias_gelu_eager, baseline_name="eager matmul + bias + GELU", reference_at=_epilogue_at,
    bytes_moved=_mm_bytes, flops=_mm_flops, metric="speedup", bands=((1.4, 1.0), (1.2, 0.6), (1.0, 0.3)),
    out_dtype=lambda inp: torch.float16, precheck=EPILOGUE)

PROBLEMS = [REUSE, TILE_OF, MATMUL, MATMUL_SPEED, EPILOGUE, EPILOGUE_SPEED]



# ------------------------------------------------------------------ fp32 inputs (ungraded)
# The graded matmul is fp16, which every GPU from a T4 up runs the same way. With fp32 inputs, tl.dot on
# sm_80+ uses TF32 tensor cores by default: each input keeps 10 of its 23 mantissa bits, so the result is
# off by ~1e-4-1e-3 relative and fails fp32's tolerance though the kernel has no bug. The check below is an
# ordinary correctness check whose known mistakes (alternative references) are those roundings.
TF32_HINT = ("This is the product of the inputs rounded to TF32 (10 mantissa bits), not the fp32 product: on "
             "Ampere and later, tl.dot on fp32 inputs uses TF32 tensor cores unless told otherwise. Pass "
             "input_precision=\"ieee\" to tl.dot for full fp32 (several times slower), or \"tf32x3\" (close to "
             "fp32, about three TF32 passes). The graded exercise is fp16, so this costs no points.")
SIXTEEN_BITS_HINT = ("This is the product of the inputs cut to 16 bits (fp16 or bf16): the kernel converts its "
                     "tiles before tl.dot. Keep them in the pointer's dtype.")


def _rounded(x: torch.Tensor, keep_bits: int, nearest: bool) -> torch.Tensor:
    """fp32 values with only ``keep_bits`` of their 23 mantissa bits (TF32: 10, bf16: 7), rounded to
    nearest or truncated (tensor cores fed raw fp32 registers ignore the low bits)."""
    drop = 23 - keep_bits
    bits = x.detach().to("cpu", torch.float32).contiguous().view(torch.int32)
    if nearest:
        bits = bits + (1 << (drop - 1))
    return (bits & ~((1 << drop) - 1)).view(torch.float32)


def _product_of_rounded(keep_bits: int, nearest: bool):
    return lambda c: (_rounded(c.inputs[0], keep_bits, nearest).double()
                      @ _rounded(c.inputs[1], keep_bits, nearest).double())


def _fp32_cases(gen, on_gpu):
    # A's values sit near fp16's smallest normal (6e-5): TF32 keeps fp32's exponent range, fp16 does not,
    # so a kernel that converts its tiles to fp16 cannot pass for one that uses TF32.
    shapes = [(509, 384, 1024), (256, 256, 256)] if on_gpu else [(37, 40, 96), (64, 64, 64)]
    return [Case(f"M={m}, N={n}, K={k}, fp32", [torch.randn(m, k, generator=gen) * 2.0 ** -14,
                                                torch.randn(k, n, generator=gen)]) for m, n, k in shapes]


MATMUL_FP32 = CorrectnessProblem(
    "matmul_fp32", 0, ("matmul",), "matmul(a, b) on fp32 inputs (ungraded)", signature="matmul(a, b)",
    make_cases=_fp32_cases, reference=lambda c: c.inputs[0].double() @ c.inputs[1].double(),
    out_dtype=lambda c: torch.float32, out_shape=_out_shape,
    mistakes=((_product_of_rounded(10, True), TF32_HINT), (_product_of_rounded(10, False), TF32_HINT),
              (lambda c: c.inputs[0].half().double() @ c.inputs[1].half().double(), SIXTEEN_BITS_HINT),
              (_product_of_rounded(7, True), SIXTEEN_BITS_HINT)))


def check_matmul_fp32(matmul) -> bool:
    """Ungraded: ``matmul`` on fp32 inputs, checked like the graded matmul. A failure is said, not raised,
    so that Run All goes on (on sm_80+ the solution itself gets the TF32 hint)."""
    try:
        learner.check(MATMUL_FP32, matmul)
    except CheckFailed as failed:
        say(f"✗ {failed}")
        return False
    return True


# ------------------------------------------------------------------ what the notebook calls
check_answers_reuse = learner.checker(REUSE)
check_tile_of = learner.checker(TILE_OF)
check_matmul = learner.checker(MATMUL)
check_matmul_speed = learner.checker(MATMUL_SPEED)
check_matmul_bias_gelu = learner.checker(EPILOGUE)
check_matmul_bias_gelu_speed = learner.checker(EPILOGUE_SPEED)


def tile_order(tile_of=None, **kw):
    """Row-major next to ``tile_of`` (yours; the grouped reference if None), one wave at a time."""
    from .widgets import tile_order as _tile_order
    return _tile_order({"row-major": row_major_tile,
                        "grouped" if tile_of is None else "your tile_of": tile_of or grouped_tile}, **kw)


def baseline_matmul(sizes=(1024, 2048, 4096)) -> dict | None:
    """cuBLAS TFLOP/s for square fp16 matmuls on this GPU."""
    if not DEVICE.on_gpu:
        print("No GPU: cuBLAS is not timed here. (On an H100, torch.matmul reaches ~600-700 TFLOP/s in fp16 "
              "at 2048^3 and above; on a T4 roughly 25-45.)")
        return None
    from ...timing import bench
    out = {}
    for n in sizes:
        a, b = torch.randn(n, n, device="cuda").half(), torch.randn(n, n, device="cuda").half()
        ms = bench(lambda: torch.matmul(a, b))
        out[n] = 2 * n ** 3 / (ms * 1e-3) / 1e12
        print(f"torch.matmul fp16 {n}^3: {ms * 1e3:8.1f} us, {out[n]:6.1f} TFLOP/s")
    return out


def tflops_sweep(matmul, sizes=None, plot: bool = True) -> list[dict]:
    """TFLOP/s of ``matmul`` and torch.matmul on square fp16 sizes (GPU only)."""
    if not DEVICE.on_gpu:
        print("No GPU: the sweep needs one (the interpreter's timings say nothing about a GPU). "
              "The committed chart assets/bench/lesson02_tflops.png shows one from an H100.")
        return []
    from ...sweeps import matmul_sweep, plot_matmul_sweep
    rows = matmul_sweep({"your matmul": matmul, "torch.matmul": torch.matmul},
                        sizes or (512, 1024, 2048, 4096, 8192))
    if plot:
        import matplotlib.pyplot as plt
        plot_matmul_sweep(rows, f"fp16 matmul on {DEVICE.name}")
        plt.show()
    return rows


def roofline(matmul=None, matmul_bias_gelu=None):
    """Time the matmul once more at 4096^3 (GPU), record it and draw the roofline with every point so far."""
    from ...roofline import measure_point, plot_roofline
    n = DEVICE.size(gpu=SPEED_N, cpu=128)
    for label, fn, bias in (("matmul fp16", matmul, False), ("matmul+bias+GELU fp16", matmul_bias_gelu, True)):
        if fn is not None:
            inputs = _randn_matmul(n, n, n, bias=bias)(torch.Generator(DEVICE.torch_device).manual_seed(0),
                                                       DEVICE.torch_device)
            measure_point(label, fn, inputs, _mm_flops(inputs), _mm_bytes(inputs))
    return plot_roofline()


def going_further() -> None:
    """Which ungraded extensions this GPU can run, and why the others are skipped."""
    from ...device import explain_extensions
    rows = [
        ("bf16 matmul (same kernel, bf16 inputs)", DEVICE.supports_bf16(), "needs sm_80+; the interpreter has no bf16"),
        ("fp32 inputs with input_precision='tf32' vs 'ieee'", bool(DEVICE.capability and DEVICE.capability >= (8, 0)),
         "TF32 tensor cores need sm_80+ (on a T4 tl.dot on fp32 is plain fp32)"),
        ("FP8 (e4m3) inputs", DEVICE.supports_fp8(), "needs sm_89+"),
        ("TMA tile loads (tl.make_tensor_descriptor) and a persistent grid", DEVICE.supports_tma(), "needs sm_90"),
    ]
    explain_extensions(rows)
