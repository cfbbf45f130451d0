"""Lesson 01: the memory wall, the roofline, vector add and a fused element-wise chain."""
from __future__ import annotations

import torch

from ... import learner
from ...problems.base import Answer, AnswersProblem, Case, CorrectnessProblem, SpeedProblem
from ..answers import bound, follow_on, intensity

LESSON = "01_roofline_vector_add"

# ------------------------------------------------------------------ numeric answers
ADD_N = 1 << 24
MM_N = 4096


def _add_answers(facts):
    b, f = 3 * 2 * ADD_N, ADD_N
    return [
        Answer("ADD_BYTES", b, explain=(
            "Count what crosses DRAM for one element: how many tensors are read, how many are written, and the "
            "size of one fp16 value; then multiply by the number of elements.")),
        Answer("ADD_FLOPS", f, explain="Count the arithmetic one output element needs, then all of them."),
        Answer("ADD_INTENSITY", f / b, rel_tol=0.03, explain="Arithmetic intensity is FLOPs per byte moved."),
        Answer("ADD_BOUND", facts["bound"](f / b), explain="Compare the intensity with this GPU's ridge point."),
    ]


def _mm_answers(facts):
    b, f = 3 * 2 * MM_N * MM_N, 2 * MM_N ** 3
    return [
        Answer("MM_BYTES", b, explain=(
            "The least any kernel can move: each matrix crosses DRAM once (which are read, which written?); "
            "count its elements and the bytes of one fp16 value.")),
        Answer("MM_FLOPS", f, explain=(
            "Each output element is a dot product: how long is it, and how many FLOPs is one multiply-add? "
            "Then count the outputs.")),
        Answer("MM_INTENSITY", f / b, rel_tol=0.03, explain="Arithmetic intensity is FLOPs per byte moved."),
        Answer("MM_BOUND", facts["bound"](f / b), explain="Compare the intensity with this GPU's ridge point."),
    ]


ANSWERS_ADD = AnswersProblem("answers_add", 2, ("ADD_BYTES", "ADD_FLOPS", "ADD_INTENSITY", "ADD_BOUND"),
                             "fp16 vector add by the numbers", answers=_add_answers,
                             judge=follow_on({"ADD_INTENSITY": intensity("ADD_FLOPS", "ADD_BYTES"),
                                              "ADD_BOUND": bound("ADD_INTENSITY")}))
ANSWERS_MM = AnswersProblem("answers_matmul", 2, ("MM_BYTES", "MM_FLOPS", "MM_INTENSITY", "MM_BOUND"),
                            "fp16 matmul by the numbers", answers=_mm_answers,
                            judge=follow_on({"MM_INTENSITY": intensity("MM_FLOPS", "MM_BYTES"),
                                             "MM_BOUND": bound("MM_INTENSITY")}))


# ------------------------------------------------------------------ element-wise kernels
def _lengths(gen: torch.Generator, on_gpu: bool) -> list[int]:
    """Lengths that are not multiples of any block, plus secret-seeded random ones."""
    fixed = [1, 7, 1000, 4097, (1 << 20) + 3] if on_gpu else [1, 7, 1000, 4097]
    hi = 3_000_000 if on_gpu else 20_000
    rand = [int(torch.randint(2, hi, (1,), generator=gen)) for _ in range(2)]
    return fixed + rand


def _values(n: int, dtype, gen) -> torch.Tensor:
    scale = float(torch.empty(1).uniform_(0.5, 8.0, generator=gen))
    return (torch.randn(n, generator=gen, dtype=torch.float32) * scale).to(dtype)


def _elementwise_cases(n_inputs: int):
    def make(gen, on_gpu):
        cases = []
        for n in _lengths(gen, on_gpu):
            for dt in (torch.float32, torch.float16):
                cases.append(Case(f"n={n}, {str(dt).replace('torch.', '')}",
                                  [_values(n, dt, gen) for _ in range(n_inputs)]))
        return cases
    return make


def _same_dtype(case):
    return case.inputs[0].dtype


def _same_shape(case):
    return tuple(case.inputs[0].shape)


ADD = CorrectnessProblem(
    "add_correct", 4, ("add",), "add(x, y)", signature="add(x, y)",
    make_cases=_elementwise_cases(2),
    reference=lambda c: c.inputs[0].double() + c.inputs[1].double(),
    out_dtype=_same_dtype, out_shape=_same_shape)


def silu_gate_reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """out = x * sigmoid(x) * y + x, in float64."""
    x, y = x.double(), y.double()
    return x * torch.sigmoid(x) * y + x


def silu_gate_eager(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The eager chain the fused kernel replaces: four kernels, each a round trip to memory."""
    s = torch.sigmoid(x)
    t = x * s
    u = t * y
    return u + x


# x * sigmoid(x) * y + x cancels where sigmoid(x) * y is near -1: there an honest float32 kernel's error, which
# follows |x|, is large against the output itself (n=1: 2.6e-5 of its value, over float32's 1e-5, in a CI run of
# 2026-11-27). So the error is judged against an RMS of at least 0.05, twenty times under the smallest the
# inputs' scales give (0.5 to 8): a kernel in too low a precision, or a wrong one, is still off by far more.
FUSED_FLOOR = {"output": 0.05}

FUSED = CorrectnessProblem(
    "fused_correct", 3, ("silu_gate",), "silu_gate(x, y)", signature="silu_gate(x, y)",
    make_cases=_elementwise_cases(2),
    reference=lambda c: silu_gate_reference(*c.inputs),
    out_dtype=_same_dtype, out_shape=_same_shape, norm_floor=FUSED_FLOOR)


# ------------------------------------------------------------------ speed
# Sizes chosen so one call takes >= 100 us even on an H200 (~4.3 TB/s): small sizes are
# launch-bound and their ratios swing by +-10-16 % (GRADING.md), too much to grade.
# They are multiples of 16: at an odd n Triton cannot prove that whole 16-byte vectors are
# in bounds, and a plain masked fp16 kernel drops to 2-byte loads (measured on an H200:
# 1.8 TB/s at 3*2^25+17 vs 4.1 TB/s at 3*2^25). Correctness is checked at odd sizes instead.
ADD_SPEED_N = 1 << 26  # fp32: 805 MB moved per call
FUSED_SPEED_N = 3 * (1 << 25)  # fp16: 604 MB per fused call


def _randn_pair(n, dtype):
    def make(gen, device):
        return [torch.randn(n, generator=gen, device=device, dtype=torch.float32).to(dtype) for _ in range(2)]
    return make


def _copy_baseline_factory():
    # Copy bandwidth measured with the same bytes as the add: read 1.5 n and write 1.5 n elements.
    buf = {}

    def copy(x, y):
        key = (x.numel(), x.dtype, str(x.device))
        if key not in buf:
            m = (3 * x.numel()) // 2
            buf.clear()
            buf[key] = (torch.randn(m, device=x.device).to(x.dtype), torch.empty(m, device=x.device, dtype=x.dtype))
        src, dst = buf[key]
        return dst.copy_(src)
    return copy


ADD_BANDWIDTH = SpeedProblem(
    "add_bandwidth", 2, ("add",), "add: bandwidth vs a copy", signature="add(x, y)",
    make_inputs=_randn_pair(ADD_SPEED_N, torch.float32),
    baseline=_copy_baseline_factory(), baseline_name="a device copy of the same bytes",
    reference_at=lambda inp, idx: inp[0][idx].double() + inp[1][idx].double(),
    bytes_moved=lambda inp: 3 * inp[0].numel() * inp[0].element_size(),
    baseline_bytes=lambda inp: 2 * ((3 * inp[0].numel()) // 2) * inp[0].element_size(),
    metric="bandwidth", bands=((0.85, 1.0), (0.70, 0.6), (0.50, 0.3)),
    out_dtype=lambda inp: inp[0].dtype, precheck=ADD)

FUSED_SPEED = SpeedProblem(
    "fused_speed", 2, ("silu_gate",), "silu_gate: fused vs eager", signature="silu_gate(x, y)",
    make_inputs=_randn_pair(FUSED_SPEED_N, torch.float16),
    baseline=silu_gate_eager, baseline_name="the eager PyTorch chain",
    reference_at=lambda inp, idx: silu_gate_reference(inp[0][idx], inp[1][idx]),
    bytes_moved=lambda inp: 3 * inp[0].numel() * inp[0].element_size(),
    metric="speedup", bands=((2.5, 1.0), (1.8, 0.6), (1.2, 0.3)),
    out_dtype=lambda inp: inp[0].dtype, precheck=FUSED)

PROBLEMS = [ANSWERS_ADD, ANSWERS_MM, ADD, ADD_BANDWIDTH, FUSED, FUSED_SPEED]



# ------------------------------------------------------------------ what the notebook calls
check_answers_add = learner.checker(ANSWERS_ADD)
check_answers_matmul = learner.checker(ANSWERS_MM)
check_add = learner.checker(ADD)
check_add_bandwidth = learner.checker(ADD_BANDWIDTH)
check_silu_gate = learner.checker(FUSED)
check_silu_gate_speed = learner.checker(FUSED_SPEED)


def roofline_explorer(**kw):
    """Where a kernel of a given intensity lands on this device's roofline (ipywidgets)."""
    from .widgets import roofline_explorer as _explorer
    return _explorer(**kw)


def bandwidth_sweep(add, max_log2: int | None = None):
    """GB/s of ``add`` and of torch's add over sizes 2^10 .. 2^max: launch-bound, then bandwidth-bound."""
    from ... import sweeps
    return sweeps.bandwidth_sweep(add, max_log2=max_log2)


def baseline_add() -> float | None:
    """Time torch's own add at 2^24 fp32 elements and print its bandwidth (GPU only)."""
    from ...device import DEVICE
    if not DEVICE.on_gpu:
        print("No GPU: the interpreter's timings say nothing about a GPU, so the baseline is skipped here.")
        return None
    from ...timing import bench
    n = 1 << 24
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    ms = bench(lambda: x + y)
    print(f"torch add, n = 2^24 fp32: {ms * 1e3:.1f} us per call, {3 * 4 * n / (ms * 1e-3) / 1e9:,.0f} GB/s")
    return ms


def roofline(add=None, silu_gate=None):
    """Time the learner's kernels once more (GPU), record them and draw this device's roofline."""
    from ...device import DEVICE
    from ...roofline import measure_point, plot_roofline
    n = DEVICE.size(gpu=1 << 26, cpu=1 << 12)
    for label, fn, flops_per, bytes_per, dtype in (("add fp32", add, 1, 12, torch.float32),
                                                   ("silu_gate fp16", silu_gate, 6, 6, torch.float16)):
        if fn is not None:
            inputs = [torch.randn(n, device=DEVICE.torch_device).to(dtype) for _ in range(2)]
            measure_point(label, fn, inputs, flops_per * n, bytes_per * n)
    return plot_roofline()


def going_further() -> None:
    """Say which ungraded extensions this GPU can run, and why the others are skipped."""
    from ...device import DEVICE, explain_extensions
    rows = [
        ("bf16 add (tl.bfloat16)", DEVICE.supports_bf16(), "needs sm_80+ (Ampere); the interpreter has no bf16"),
        ("FP8 element-wise casts", DEVICE.supports_fp8(), "needs sm_89+ (Ada/Hopper)"),
        ("TMA block loads (tl.make_tensor_descriptor)", DEVICE.supports_tma(), "needs sm_90 (Hopper)"),
        ("persistent grid (one program per SM looping over blocks)", DEVICE.on_gpu, "needs a GPU to time"),
    ]
    explain_extensions(rows)
