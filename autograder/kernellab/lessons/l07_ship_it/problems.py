"""Lesson 07: ship it. The kernels of lessons 03-05 inside a real PyTorch program: a fused residual-add +
LayerNorm backward in Triton from what the forward saved (h = x + residual, each row's mean and rstd: three passes
over (R, d), as PyTorch's own backward reads; dh one row at a time, the next tile loaded while this one is computed;
dweight and dbias by a two-stage reduction), the kernels
registered as ``torch.library`` custom ops so that ``torch.compile(fullgraph=True)`` traces lesson 06's block
without a graph break, launch cost made visible, and the block's training step under ``torch.compile`` timed
against eager + SDPA and against ``torch.compile`` of eager + SDPA.

How this lesson's graded cells may use ``torch.library`` (the code rules, ``code_rules.py``, apply as in every
lesson: no ``torch.compile``, no CUDA graphs, no private APIs in a graded cell):

- **Allowed**: ``torch.library.custom_op`` with ``register_fake``, ``register_autograd`` and ``register_kernel``
  (and ``triton_op``/``wrap_triton`` on a GPU; on the CPU Inductor cannot trace into an interpreted kernel, so
  the notebook uses ``custom_op``). The learner's ops are how their kernels reach the compiler.
- **The grader compiles**: ``compiled_block_correct`` runs the learner's ``block_forward`` eagerly under the op
  watch first (the watch runs the body of every Python custom op itself, so a body that computes with PyTorch
  behind a token launch is named), then under ``torch.compile(fullgraph=True)`` with a backend that keeps the
  forward and backward ATen graphs. A graph break is a compile error (fullgraph); the graphs must hold the
  learner's ops and none of PyTorch's attention, softmax, batched matmul or LayerNorm (forward or backward)
  ops; outputs and every gradient are compared with the float64 eager block. The speed problems compile the
  same way with Inductor on the GPU and inspect every graph Inductor compiles, so a program that recompiles
  into PyTorch's attention or LayerNorm on a later call fails to compile instead of being timed; before that, each
  speed problem runs the step once eagerly under the same watch (``eager_rules_hold``), since the timed compiled
  graph runs the ops' bodies unwatched.
- **Refused**: ``torch.compile``/CUDA graphs in a graded cell (the code rules, before anything runs); PyTorch's
  attention or LayerNorm in the block, eager or compiled; a ``register_kernel`` or library registration for a
  PyTorch (``aten``) op (it would change the baseline only in the worker; the baseline is timed elsewhere).
- **Residual risk** (docs/GRADE_OF_RECORD.md): the compiled block is graded in the worker (worker only, like
  lesson 06's), and a custom op's body runs unwatched inside the compiled graph; a body that behaves
  differently there than in the watched eager run is caught only by the outputs being checked.
"""
from __future__ import annotations

import contextlib
import dataclasses
import warnings

import torch
import torch.nn.functional as F

from ... import learner
from ...device import DEVICE
from ...invoke import Refused
from ...problems.base import Case, CorrectnessProblem, SpeedProblem
from ...timing import STEP_HOST_MS
from ...watch import current, policy
from ..l06_profile_first.problems import (_ATTENTION_OPS, _NORM_BACKWARD_OPS, _NORM_FORWARD_OPS, BLOCK, BLOCK_OUTPUTS,
                                          BLOCK_RULE,
                                          EPS, GPU_SHAPE, Shape, _block_cases, _block_reference, _bytes, _packets,
                                          _reference_step_sketch, _speed_inputs, attention_sdpa, block_eager,
                                          block_flops, block_inputs, must_launch, run_block, step_sketch, unpack,
                                          with_grads)

LESSON = "07_ship_it"


# ------------------------------------------------------------------ exercise 1: the fused LayerNorm backward
def saved_stats(h, eps):
    """The float32 mean and rstd of each row of ``h``, as the forward saves them (computed in float64 here)."""
    hd = h.double()
    mean = hd.mean(-1)
    rstd = 1 / torch.sqrt(hd.var(-1, unbiased=False) + eps)
    return mean.float().contiguous(), rstd.float().contiguous()


def ln_backward_case(gen, rows, cols, dtype="fp16", offset=0.0, eps=1e-5, row_stride=None, scale=1.0) -> Case:
    """h = x + residual as the forward saved it, weight, dy, and the forward's mean and rstd of h, for
    ``add_layernorm_backward``. ``offset``: rows whose mean is far from 0; ``row_stride``: h and dy are views with
    that row stride; ``scale``: rows of tiny spread (rstd large)."""
    from ..l03_fused_softmax_layernorm.problems import ln_case
    c = ln_case(gen, rows, cols, dtype, offset=offset, eps=eps, row_stride=row_stride)
    x, r, w, _b, eps = c.inputs
    if scale != 1.0:
        x, r = (x.float() * scale).to(x.dtype), (r.float() * scale).to(r.dtype)
    width = row_stride or cols
    h = torch.empty(rows, width, dtype=x.dtype)[:, :cols]  # a view with x's row stride
    h.copy_(x.float() + r.float())  # the sum in float32, rounded once to the forward's dtype
    dy = torch.randn(rows, width, generator=gen).to(x.dtype)[:, :cols]
    mean, rstd = saved_stats(h, eps)
    tags = c.tags + (("several_programs",) if rows > 1 else ()) + (("low_variance",) if scale != 1.0 else ())
    label = c.label.replace(", x a view", ", h and dy views") + (f", values x{scale:g}" if scale != 1.0 else "")
    return Case(label, [h, w, dy, mean, rstd], tags=tags)


def _ln_backward_cases(gen, on_gpu):
    cases = [ln_backward_case(gen, 1, 5), ln_backward_case(gen, 3, 7, "fp32"), ln_backward_case(gen, 37, 96),
             ln_backward_case(gen, 130, 200), ln_backward_case(gen, 70, 1000, "fp32", eps=1e-3),
             ln_backward_case(gen, 12, 512, offset=2000.0), ln_backward_case(gen, 9, 640, row_stride=700),
             ln_backward_case(gen, 66, 33, scale=1e-3)]
    if on_gpu:
        cases += [ln_backward_case(gen, 1000, 4096), ln_backward_case(gen, 2049, 768),
                  ln_backward_case(gen, 300, 8192), ln_backward_case(gen, 513, 5120, "fp32")]
    rows = int(torch.randint(65, 400 if on_gpu else 150, (1,), generator=gen))
    cols = int(torch.randint(17, 3000 if on_gpu else 700, (1,), generator=gen))
    return cases + [ln_backward_case(gen, rows, cols)]


def ln_grads(h, w, dy, mean, rstd, dtype=torch.float64):
    """(dh, dweight, dbias) of y = LayerNorm(h) * w + b in ``dtype``, from the saved mean and rstd (dh is also the
    gradient of x and of the residual, h = x + residual). With exact statistics this is autograd's gradient of
    F.layer_norm (tests/test_lesson07_units.py compares the two)."""
    hh, g, ww = h.to(dtype), dy.to(dtype), w.to(dtype)
    x_hat = (hh - mean.to(dtype)[:, None]) * rstd.to(dtype)[:, None]
    gw = g * ww
    dh = rstd.to(dtype)[:, None] * (gw - gw.mean(-1, keepdim=True) - x_hat * (gw * x_hat).mean(-1, keepdim=True))
    return dh, (g * x_hat).sum(0), g.sum(0)


def _ln_backward_reference(case):
    return ln_grads(*case.inputs)


def _ln_backward_without_mean_terms(case):
    """A known mistake: dh = rstd * w * dy, as if the mean and the variance did not depend on h."""
    h, w, dy, mean, rstd = case.inputs
    _, dw, db = ln_grads(*case.inputs)
    return rstd.double()[:, None] * w.double() * dy.double(), dw, db


LN_BACKWARD_HINTS = {
    "several_programs": ("Right on a single row and wrong with several: the second stage must add up the partial sums of "
                      "every program. Reduce the (programs, d) buffer over axis 0, the programs, for each column; "
                      "summing over axis 1 adds up columns, a reduction over the wrong axis."),
    "offset": ("Right on ordinary rows and wrong on rows whose mean is far from zero: compute x_hat = (h - mean) * rstd "
               "in float32 (in fp16, h - mean keeps no digits of the row's spread when the mean is ~2000)."),
    "low_variance": ("Wrong only on rows of tiny spread: use the rstd you are given (the forward added eps inside the "
                     "root); recomputing it without eps divides by almost nothing."),
    "row_stride": "Wrong only for strided inputs: address the rows of h and dy with their own strides.",
    "tail": ("Wrong only where d is not a power of two: mask the columns >= d, and keep the padding out of the "
             "row sums (tl.where(mask, ..., 0.0))."),
}

LN_BACKWARD = CorrectnessProblem(
    "ln_backward_correct", 4, ("add_layernorm_backward",), "add_layernorm_backward: dh, dweight and dbias",
    signature="add_layernorm_backward(h, weight, dy, mean, rstd)", make_cases=_ln_backward_cases,
    reference=_ln_backward_reference, outputs=("dh", "dweight", "dbias"),
    out_dtype=lambda c: (c.inputs[0].dtype, c.inputs[1].dtype, c.inputs[1].dtype),
    out_shape=lambda c: (tuple(c.inputs[0].shape), tuple(c.inputs[1].shape), tuple(c.inputs[1].shape)),
    hints=LN_BACKWARD_HINTS, tolerance_repeat=1e-6,
    mistakes=((_ln_backward_without_mean_terms, (
        "dh is rstd * w * dy: the gradient through the mean and the variance is missing (subtract the row mean of "
        "w*dy and x_hat times the row mean of w*dy*x_hat)."),),))

SPEED_ROWS, SPEED_COLS = 16384, 4096  # 403 MB of fp16 traffic at least: ~0.15 ms on an H100, ~1.3 ms on a T4


def _ln_speed_inputs(gen, device, rows=SPEED_ROWS, cols=SPEED_COLS):
    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=gen.device).to(device=device, dtype=torch.float16)
    w = (torch.rand(cols, generator=gen, device=gen.device) + 0.5).to(device=device, dtype=torch.float16)
    h = randn(rows, cols) + 3.0
    mean, rstd = saved_stats(h, EPS)
    return [h, w, randn(rows, cols), mean, rstd]


def eager_ln_backward_of(inputs):
    """PyTorch's own LayerNorm forward on h (eps = EPS, as the inputs' rstd), once; the returned callable times its
    backward alone: autograd's LayerNorm backward (dh, dweight, dbias) from the h, mean and rstd its forward
    saved, as a training step pays it in eager mode."""
    h, w, dy = inputs[:3]
    hh, ww = (t.detach().clone().requires_grad_() for t in (h, w))
    bb = torch.zeros_like(w, requires_grad=True)
    y = F.layer_norm(hh, (h.shape[-1],), ww, bb, EPS)

    def backward(*_):
        return torch.autograd.grad(y, (hh, ww, bb), dy, retain_graph=True)
    return backward


def _ln_speed_reference(inputs):
    return torch.cat([g.reshape(-1) for g in ln_grads(*inputs, dtype=torch.float32)])


def _ln_bytes(inputs):
    h = inputs[0]
    return 3 * h.numel() * h.element_size()  # h and dy read, dh written (the statistics: 8 bytes a row)


LN_BACKWARD_SPEED = SpeedProblem(
    "ln_backward_speed", 2, ("add_layernorm_backward",), "add_layernorm_backward: speed vs PyTorch's eager backward",
    signature=LN_BACKWARD.signature, make_inputs=_ln_speed_inputs, baseline=None, baseline_setup=eager_ln_backward_of,
    baseline_name="PyTorch's eager LayerNorm backward", reference_full=_ln_speed_reference,
    sketch_of=lambda out: torch.cat([g.reshape(-1) for g in out]), bytes_moved=_ln_bytes,
    bands=((1.2, 1.0), (1.0, 0.6), (0.8, 0.3)), out_dtype=lambda inputs: torch.float16, precheck=LN_BACKWARD)


# ------------------------------------------------------------------ exercise 2: custom ops under torch.compile
aten = torch.ops.aten
# In the compiled block's ATen graphs (AOTAutograd's, before or after Inductor's decompositions): what must be the
# learner's. exp is not here: Inductor's decomposition of GELU's backward uses it.
COMPILED_DENY = (_NORM_BACKWARD_OPS | _packets("native_layer_norm", "layer_norm", "var", "var_mean", "std", "std_mean",
                                               "rsqrt", "_softmax", "softmax", "_softmax_backward_data", "_safe_softmax",
                                               "bmm", "baddbmm", "logsumexp")
                 | frozenset(p for p in _ATTENTION_OPS if "attention" in str(p)))
# Eager, watched: the forward as lesson 06's; the backward may not compute the LayerNorm's gradient in PyTorch.
STRICT_BACKWARD_DENY = _ATTENTION_OPS | _NORM_BACKWARD_OPS | _NORM_FORWARD_OPS | _packets("mean")
FORWARD_WHY = ("The matmuls, GELU and element-wise ops may stay in PyTorch, but attention and both add + LayerNorms "
               "must run in your Triton kernels, called through your custom ops.")
BACKWARD_WHY = ("In this lesson the backward's LayerNorm gradient is your Triton kernel too (exercise 1), called "
                "through a custom op: PyTorch may compute the matmuls' gradients, not attention's or the LayerNorm's.")
_NOT_LEARNER = ("aten", "prim", "prims", "higher_order", "_c10d_functional", "c10d_functional", "profiler")


def _op_namespace(target) -> str | None:
    name = getattr(getattr(target, "_schema", None), "name", None)
    if name:
        return name.split("::")[0]
    return None


def learner_nodes(gm) -> list[str]:
    """Nodes of an ATen graph that run the learner's code: calls of custom ops, or user Triton kernels
    (``triton_op`` traced by Inductor)."""
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        ns = _op_namespace(n.target)
        if ns is not None and ns not in _NOT_LEARNER:
            out.append(str(n.target))
        elif "triton_kernel_wrapper" in str(n.target):
            out.append("triton kernel")
    return out


def denied_nodes(gm) -> list[str]:
    bad = []
    for n in gm.graph.nodes:
        pkt = getattr(n.target, "overloadpacket", None)
        if n.op == "call_function" and pkt is not None and pkt in COMPILED_DENY:
            bad.append(str(pkt).replace("aten.", "aten::"))
    return bad


def inspect_graphs(graphs: dict) -> None:
    """Refused unless the forward and backward graphs run the learner's ops and none of PyTorch's attention or
    LayerNorm. ``graphs``: kind -> list of GraphModules."""
    for kind in ("forward", "backward"):
        gms = graphs.get(kind) or []
        if not gms:
            raise Refused(f"torch.compile produced no {kind} graph: does the block's output depend on its inputs "
                          "through your ops?")
        bad = sorted({b for gm in gms for b in denied_nodes(gm)})
        if bad:
            raise Refused(f"the compiled {kind} graph computes with PyTorch's {', '.join(bad[:4])}. "
                          + (FORWARD_WHY if kind == "forward" else BACKWARD_WHY))
        if not any(learner_nodes(gm) for gm in gms):
            raise Refused(f"the compiled {kind} graph calls none of your custom ops: register your kernels with "
                          "torch.library.custom_op (and their backward with register_autograd) and call them in "
                          "block_forward.")


def _capture_backend(graphs: dict):
    """A torch.compile backend that keeps AOTAutograd's forward and backward graphs and runs them as they are
    (no code generation: quick on a CPU, and what a correctness check needs)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs.setdefault(kind, []).append(gm)
            return make_boxed_func(gm.forward)
        return compiler
    return aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward"))


def _inspecting_inductor():
    """Inductor, refusing to compile any graph that computes attention or LayerNorm with PyTorch (every graph,
    recompilations included, passes through here before it can run)."""
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    def inner(gm, example_inputs, **kwargs):
        bad = denied_nodes(gm)
        if bad:
            raise Refused(f"the compiled graph computes with PyTorch's {', '.join(sorted(set(bad))[:4])}. "
                          + FORWARD_WHY)
        return compile_fx_inner(gm, example_inputs, **kwargs)

    def backend(gm, example_inputs):
        return compile_fx(gm, example_inputs, inner_compile=inner)
    return backend


COMPILE_HINTS = (
    ("no fake impl", "An op has no fake implementation: torch.compile traces with fake tensors (shapes only) and "
                     "needs `@op.register_fake` returning empty tensors of the outputs' shapes, dtypes and "
                     "devices."),
    ("data pointer", "A kernel was launched on a fake tensor: call it inside a torch.library.custom_op whose "
                     "register_fake describes the outputs, so the compiler never runs it while tracing."),
    ("autograd kernel", "An op has no registered backward: `op.register_autograd(backward, setup_context=...)`."),
    ("stride", "If an op's output is not contiguous, its fake implementation must return the same strides "
               "(Inductor checks the real outputs against the fake's)."),
)
GRAPH_BREAK_HINT = ("Dynamo could not trace it, which with fullgraph=True is an error (a graph break). A Triton "
                    "launch inside an autograd.Function breaks the graph: register the kernels with "
                    "torch.library.custom_op instead, and call the ops from block_forward.")


def compile_failure(exc: BaseException) -> str:
    """One paragraph for a torch.compile error: the cause dynamo gives, and what usually fixes it."""
    if isinstance(exc, Refused):
        return str(exc)
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else type(exc).__name__
    if first.endswith("raised:") and len(lines) > 1:  # a backend's failure: its cause is on the next line
        first = f"{first} {lines[1]}"
    explanation = next((ln.strip() for ln in text.splitlines() if ln.strip().startswith("Explanation:")), "")
    said = f"torch.compile(block_forward, fullgraph=True) failed: {first[:200]}"
    if explanation and explanation not in said:
        said += f" ({explanation[:300]})"
    low = text.lower()
    for key, hint in COMPILE_HINTS:
        if key in low:
            return f"{said}. {hint}"
    name = type(exc).__name__
    if name in ("Unsupported", "UserError") or "graph break" in low or "skipped" in low:
        return f"{said}. {GRAPH_BREAK_HINT}"
    return said + "."


@contextlib.contextmanager
def _quiet_compile():
    """Compiler warnings go nowhere (a graded cell that writes to stderr scores 0 in nbgrader); the dynamo
    cache is fresh, so every check compiles the learner's current code."""
    import logging
    torch._dynamo.reset()
    loggers = [logging.getLogger(n) for n in ("torch._dynamo", "torch._inductor", "torch.fx", "torch._functorch")]
    levels = [lg.level for lg in loggers]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for lg in loggers:
                lg.setLevel(logging.CRITICAL)
            yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)


def _unwatched():
    """The op watch is a TorchDispatchMode, and torch.compile refuses to run under one: compiled code runs with it
    off (Triton launches are still counted: the watch counts them at the launcher)."""
    from torch.utils._python_dispatch import _disable_current_modes
    return _disable_current_modes()


def compiled_block_grads(fn, x, params, dout, n_heads):
    """``fn`` under torch.compile(fullgraph=True), with its ATen graphs kept and inspected; then autograd's
    gradients of x and every weight through the compiled block: (out, dx, *dparams)."""
    graphs: dict = {}
    with _quiet_compile():
        compiled = torch.compile(fn, fullgraph=True, dynamic=False, backend=_capture_backend(graphs))
        try:
            got = with_grads(lambda x_, p, h: compiled(x_, p, h), x, params, dout, n_heads)
        except Exception as exc:  # noqa: BLE001 - a compile error is the learner's, said in one paragraph
            raise Refused(compile_failure(exc)) from None
    inspect_graphs(graphs)
    return got


def run_block_eager(fn, x, params, n_heads):
    return run_block(fn, x, params, n_heads, why=FORWARD_WHY,
                     too_few="the forward launched fewer than 2 Triton kernels: attention and both add + LayerNorms "
                             "must run your kernels, through your custom ops.")


def eager_step_with_custom_ops(fn, *inputs):
    """The block's training step as the grade of record replays it: block_forward run eagerly, every custom op's
    body watched, forward then autograd's gradients of x and every weight: (out, dx, *dparams). Refused here (the
    worker's feedback) if it computes attention or a LayerNorm with PyTorch, launches too few kernels, or an op's
    fake does not describe what the op returned; the judge holds the record to L07_BLOCK_RULE whatever the worker
    said. The output is a copy taken before the backward: a record of the call splits there (op_rules)."""
    x, params, dout, n_heads = unpack(inputs)
    kept = []

    def forward(x_, p, h):
        out = run_block_eager(fn, x_, p, h)
        kept.append(out.detach().clone())
        return out
    with must_launch(3, "the backward launched no Triton kernel: register your backward kernels with "
                        "register_autograd."):
        _out, *grads = with_grads(forward, x, params, dout, n_heads,
                                  backward_rule=lambda: policy(STRICT_BACKWARD_DENY, BACKWARD_WHY))
    st = current()
    if st is not None and st.torch_ops:
        raise Refused(st.misuse("the eager run"))
    if st is not None and st.fake_mismatch:
        raise Refused(st.fake_mismatch)
    return (kept[0], *grads)


def eager_run_under_rules(fn, x, params, dout, n_heads) -> None:
    """The block's training step run eagerly inside a watched call: refused as eager_step_with_custom_ops refuses
    (said before anything compiles: compiling a block that breaks the rules would only confuse)."""
    eager_step_with_custom_ops(fn, x, *params, dout, n_heads)


@contextlib.contextmanager
def _not_recorded():
    """Launches made inside are not part of the graded call's record (the compiled check below)."""
    from ...record import active
    rec = active()
    if rec is not None:
        rec.benchmarking += 1
    try:
        yield
    finally:
        if rec is not None:
            rec.benchmarking -= 1


def _agree(eager: tuple, compiled: tuple) -> str | None:
    """Why the compiled block's output and gradients differ from the eager run's, or None."""
    for name, a, b in zip(BLOCK_OUTPUTS, eager, compiled):
        if a is None or b is None:
            if (a is None) != (b is None):
                return f"the compiled block gave no {name} where the eager run gave one"
            continue
        a64, b64 = a.double(), b.double()
        if tuple(a.shape) != tuple(b.shape) or not torch.isfinite(b64).all() or \
                float((a64 - b64).norm()) > 2e-2 * float(a64.norm()) + 1e-6:
            return (f"the compiled block's {name} differs from the eager run's: under torch.compile your custom ops "
                    "must compute what they compute eagerly (check each op's fake and mutates_args)")
    return None


def block_then_compiled(fn, *inputs):
    """The check of the compiled block. What is graded - recorded here, replayed, checked by the judge - is the
    block run eagerly through your custom ops, forward and backward (eager_step_with_custom_ops). Then, not
    recorded, torch.compile(fullgraph=True) of the same block: it must compile with no graph break and agree with
    the eager run. That second part is the worker's check and can only take this problem's points away: a worker
    that lied about it would keep points for a correct eager block whose ops do not compile (GRADE_OF_RECORD.md)."""
    x, params, dout, n_heads = unpack(inputs)
    eager = eager_step_with_custom_ops(fn, *inputs)
    with _not_recorded(), _unwatched():  # the comparison too: it is the grader's PyTorch, not the learner's
        compiled = compiled_block_grads(fn, x, params, dout, n_heads)
        why = _agree(eager, compiled)
    if why:
        raise Refused(why[0].upper() + why[1:] + ".")
    return eager


# The judge's rule for the block's recorded eager call (op_rules.py): lesson 06's, less what the LayerNorm's gradient
# in PyTorch needs beyond the linear layers' own sums (here that gradient is the learner's kernel, exercise 1).
L07_BLOCK_RULE = dataclasses.replace(
    BLOCK_RULE, backward=BLOCK_RULE.backward - {"mean", "pow", "rsqrt", "sqrt", "var", "var_mean"}, why=FORWARD_WHY)


def _is_block(obj):
    if callable(obj):
        return None
    return "There is no function `block_forward`: define it in the exercise cell and run it."


def _compiled_block_cases(gen, on_gpu):
    """Lesson 06's block cases; on the CPU its first two (each is run eagerly and compiled)."""
    cases = _block_cases(gen, on_gpu)
    return cases if on_gpu else cases[:2]


COMPILED_BLOCK = CorrectnessProblem(
    "compiled_block_correct", 5, ("block_forward",),
    "the block with your custom ops under torch.compile(fullgraph=True): output and gradients",
    signature="block_forward(x, params, n_heads)", make_cases=_compiled_block_cases, reference=_block_reference,
    out_dtype=BLOCK.out_dtype, out_shape=BLOCK.out_shape, outputs=BLOCK_OUTPUTS, call=block_then_compiled,
    validate=_is_block, own_outputs=False, replay_call=True, replay_ops=L07_BLOCK_RULE,
    hints={"tail": ("Wrong only where N is not a multiple of the block. If the eager block was right, an op "
                    "whose kernel writes into one of its inputs needs mutates_args naming it: the compiler assumes "
                    "undeclared inputs stay as they are.")})


# ------------------------------------------------------------------ the capstone: the training step, compiled
_COMPILED: dict = {}
_EAGER_VERDICT: dict = {}


def _once_per_function(cache: dict, fn, make):
    """``make()`` for ``fn`` the first time, its kept result after (keyed by the object: a learner who runs the
    cell again gets a new function, and an id reused by a new object is not mistaken for the old one)."""
    if id(fn) not in cache or cache[id(fn)][0] is not fn:
        cache[id(fn)] = (fn, make())
    return cache[id(fn)][1]


def compiled_step(fn):
    """``fn`` (a block forward) under torch.compile(fullgraph=True): Inductor on a GPU, every graph inspected
    before it may run; the capture backend on the CPU. Compiled once per function object."""
    def compile_it():
        backend = _inspecting_inductor() if DEVICE.on_gpu else _capture_backend({})
        with _quiet_compile():
            return torch.compile(fn, fullgraph=True, dynamic=False, backend=backend)
    return _once_per_function(_COMPILED, fn, compile_it)


def eager_rules_hold(fn, x, params, dout, n_heads) -> None:
    """Once per function: its step run eagerly in a watch of its own (``eager_run_under_rules``), before it is
    compiled for timing. The timed runs execute the compiled graph, where a custom op's body is out of the watch's
    sight: without this, a step whose op hides PyTorch's attention behind a token launch was timed and scored
    (H100, 2026-11-26: 1.2 of 2 points on each step problem, the known-wrong submission sdpa_in_op)."""
    from ...watch import watched

    def verdict():
        try:
            with watched():
                eager_run_under_rules(fn, x, params, dout, n_heads)
        except Refused as exc:
            return str(exc)
        return None
    why = _once_per_function(_EAGER_VERDICT, fn, verdict)
    if why:
        raise Refused(why)


def step_through_compile(fn, *inputs):
    """A training step of the learner's block under torch.compile: forward, then the gradients of x and every
    weight. The timed call of the capstone (its first call also runs the step eagerly under the rules)."""
    x, params, dout, n_heads = unpack(inputs)
    eager_rules_hold(fn, x, params, dout, n_heads)
    with _unwatched(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return with_grads(compiled_step(fn), x, params, dout, n_heads)
        except Refused:
            raise
        except Exception as exc:  # noqa: BLE001
            raise Refused(compile_failure(exc)) from None


def _sdpa_forward(x, p, h):
    return block_eager(x, p, h, attend=attention_sdpa)


def _eager_sdpa_step(*inputs):
    return with_grads(_sdpa_forward, *unpack(inputs))


_BASELINE_COMPILED: dict = {}


def compiled_sdpa_step_of(inputs):
    """torch.compile (Inductor) of the eager + SDPA block, compiled once per process; the callable times its
    training step."""
    if "fn" not in _BASELINE_COMPILED:
        with _quiet_compile():
            _BASELINE_COMPILED["fn"] = torch.compile(_sdpa_forward, dynamic=False)
    compiled = _BASELINE_COMPILED["fn"]

    def step(*ins):
        return with_grads(compiled, *unpack(ins))
    return step


def _block_bytes(inputs):
    """The forward's least traffic (lesson 06's) three times: forward and backward."""
    return 3 * _bytes(inputs)


STEP_SPEED_SDPA = SpeedProblem(
    "step_speed_sdpa", 2, ("block_forward",), "the training step through your custom ops: yours vs eager + SDPA",
    signature=COMPILED_BLOCK.signature, make_inputs=_speed_inputs, baseline=_eager_sdpa_step,
    baseline_name="the eager block with SDPA", reference_full=_reference_step_sketch, sketch_of=step_sketch,
    bytes_moved=_block_bytes, flops=lambda inputs: block_flops(GPU_SHAPE, backward=True),
    bands=((1.05, 1.0), (0.95, 0.6), (0.85, 0.3)), out_dtype=lambda inputs: torch.float16, precheck=COMPILED_BLOCK,
    call=eager_step_with_custom_ops, replay_call=True, replay_ops=L07_BLOCK_RULE, host_ms=STEP_HOST_MS)

# Both step problems are graded on the judge's replay of the step through the learner's custom ops (the grade of
# record runs no learner Python, so no process can time the learner's own compiled program honestly), against eager
# + SDPA and torch.compile of it, made in the judge. The replay runs the ops between the kernels eagerly (no Inductor
# fusion of the glue), so the bands sit lower than for the compiled step they replaced: on an H200 (2026-11-28, three
# regrades each) the course's solution read 1.070-1.074x eager + SDPA and 0.927-0.933x torch.compile, spreads
# 0.4-0.6 %; full points from 1.05x and 0.90x keep it 2-3 % above the edge, over 3x the spread.
STEP_SPEED_COMPILE = SpeedProblem(
    "step_speed_compile", 2, ("block_forward",), "the training step through your custom ops: yours vs torch.compile of eager + SDPA",
    signature=COMPILED_BLOCK.signature, make_inputs=_speed_inputs, baseline=None, baseline_setup=compiled_sdpa_step_of,
    baseline_name="torch.compile of the eager block with SDPA", reference_full=_reference_step_sketch,
    sketch_of=step_sketch, bytes_moved=_block_bytes, flops=lambda inputs: block_flops(GPU_SHAPE, backward=True),
    bands=((0.9, 1.0), (0.83, 0.6), (0.75, 0.3)), out_dtype=lambda inputs: torch.float16, precheck=COMPILED_BLOCK,
    call=eager_step_with_custom_ops, replay_call=True, replay_ops=L07_BLOCK_RULE, host_ms=STEP_HOST_MS)

PROBLEMS = [LN_BACKWARD, LN_BACKWARD_SPEED, COMPILED_BLOCK, STEP_SPEED_SDPA, STEP_SPEED_COMPILE]

check_ln_backward = learner.checker(LN_BACKWARD)
check_ln_backward_speed = learner.checker(LN_BACKWARD_SPEED)
check_compiled_block = learner.checker(COMPILED_BLOCK)
check_step_speed_sdpa = learner.checker(STEP_SPEED_SDPA)
check_step_speed_compile = learner.checker(STEP_SPEED_COMPILE)


# ------------------------------------------------------------------ measurements the notebook shows (ungraded)
def formula_ln_backward(h, w, dy, eps=EPS):
    """Lesson 06's LayerNorm backward, the formula in PyTorch (statistics recomputed): some thirty small kernels."""
    h = h.float()
    mu = h.mean(dim=1, keepdim=True)
    rstd = torch.rsqrt(((h - mu) ** 2).mean(dim=1, keepdim=True) + eps)
    hat = (h - mu) * rstd
    g = dy.float()
    gw = g * w.float()
    dh = rstd * (gw - gw.mean(dim=1, keepdim=True) - hat * (gw * hat).mean(dim=1, keepdim=True))
    return dh.to(dy.dtype), (g * hat).sum(0).to(w.dtype), g.sum(0).to(w.dtype)


def liger_layernorm():
    """Liger-Kernel's LayerNorm function where it is installed (a GPU), else None."""
    if not DEVICE.on_gpu:
        return None
    try:
        from liger_kernel.ops.layer_norm import LigerLayerNormFunction
    except Exception:  # noqa: BLE001 - not installed, or built for another torch
        return None
    return LigerLayerNormFunction


def ln_backward_contenders(add_layernorm_backward, inputs) -> dict:
    """name -> callable() timing one LayerNorm backward on ``inputs`` = [h, w, dy, mean, rstd] (yours too, unless
    ``add_layernorm_backward`` is None). Every contender's forward saved what it reads: eager and Liger h and the
    statistics, torch.compile what Inductor chose."""
    h, w, dy, mean, rstd = inputs
    fns = {"eager (autograd of F.layer_norm)": eager_ln_backward_of(inputs),
           "lesson 06 formula in PyTorch": lambda: formula_ln_backward(h, w, dy)}
    hh, ww = (t.detach().clone().requires_grad_() for t in (h, w))
    bb = torch.zeros_like(w, requires_grad=True)
    with _quiet_compile():
        # Inductor on a GPU; on the CPU (the bench's smoke test) the capture backend, not minutes of C++
        compiled = torch.compile(lambda a, c, d: F.layer_norm(a, (a.shape[-1],), c, d, EPS), dynamic=False,
                                 backend="inductor" if DEVICE.on_gpu else "aot_eager")
        yc = compiled(hh, ww, bb)
    fns["torch.compile's backward"] = lambda: torch.autograd.grad(yc, (hh, ww, bb), dy, retain_graph=True)
    liger = liger_layernorm()
    if liger is not None:
        try:
            hl = h.detach().clone().requires_grad_()
            wl, bl = ww.detach().clone().requires_grad_(), bb.detach().clone().requires_grad_()
            yl = liger.apply(hl, wl, bl, EPS)
            fns["Liger-Kernel LayerNorm backward"] = lambda: torch.autograd.grad(yl, (hl, wl, bl), dy,
                                                                                 retain_graph=True)
        except Exception:  # noqa: BLE001 - a Liger built for another version: skip it
            pass
    if add_layernorm_backward is not None:
        fns["yours (Triton, fused)"] = lambda: add_layernorm_backward(h, w, dy, mean, rstd)
    return fns


LN_WIDTHS = (768, 1024, 2048, 4096, 8192)


def ln_inputs(rows: int, cols: int, seed: int) -> list:
    """The LayerNorm backward's inputs, (rows, cols), the same for every call with these arguments."""
    return _ln_speed_inputs(torch.Generator(DEVICE.torch_device).manual_seed(seed), DEVICE.torch_device, rows=rows,
                            cols=cols)


def ln_inputs_at(d: int, rows: int = SPEED_ROWS // 2) -> list:
    """The compared LayerNorm backward's inputs at width ``d``."""
    return ln_inputs(rows, d, seed=d)


def interleaved_ms(fns: dict, rounds: int) -> dict:
    from ...timing import interleaved
    t = interleaved(fns, rounds)
    return {n: t[n] for n in fns}


def time_ln_backward(add_layernorm_backward=None, widths=LN_WIDTHS, rows=SPEED_ROWS // 2, rounds: int = 3,
                     timer=interleaved_ms) -> dict:
    """width -> name -> median ms, contenders interleaved by ``timer(fns, rounds)`` (the course's timer: GPU)."""
    return {d: timer(ln_backward_contenders(add_layernorm_backward, ln_inputs_at(d, rows)), rounds) for d in widths}


def compare_ln_backward(add_layernorm_backward, rounds: int = 3):
    """Yours beside eager, lesson 06's formula, torch.compile's backward and Liger-Kernel's (where installed)."""
    if not DEVICE.on_gpu:
        print("No GPU: the comparison needs one. assets/bench/lesson07.md has an H100's numbers.")
        return {}
    res = time_ln_backward(add_layernorm_backward, rounds=rounds)
    for d, row in res.items():
        base = row["eager (autograd of F.layer_norm)"]
        print(f"d={d}: " + ", ".join(f"{n} {ms:.3f} ms ({base / ms:.2f}x)" for n, ms in row.items()))
    return res


def graph_breaks(fn, *args) -> dict:
    """Compile ``fn`` without fullgraph and count what dynamo made of it: graphs, graph breaks and their
    reasons (the first few). A Triton launch inside an autograd.Function is a graph break."""
    from torch._dynamo.utils import counters
    graphs = []

    def count(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    with _quiet_compile():
        counters.clear()
        error = None
        try:
            torch.compile(fn, backend=count, dynamic=False)(*args)
        except Exception as exc:  # noqa: BLE001
            error = compile_failure(exc)
        reasons = list(counters.get("graph_break", {}))
    return {"graphs": len(graphs), "breaks": sum(counters.get("graph_break", {}).values()),
            "reasons": [r.splitlines()[0][:160] for r in reasons[:5]], "error": error}


def show_graph_breaks(fn, what: str = "block_forward"):
    """Lesson 06's block (autograd.Functions) and yours (custom ops) through dynamo, on a small block."""
    s = Shape(1, 40, 64, 2, 128)
    x, params, _dout, H = unpack(block_inputs(torch.Generator().manual_seed(7), s, device=DEVICE.torch_device))
    r = graph_breaks(fn, x, params, H)
    print(f"{what}: {r['graphs']} graph(s), {r['breaks']} graph break(s)")
    for reason in r["reasons"]:
        print(f"  - {reason}")
    if r["error"]:
        print(f"  error: {r['error'][:300]}")
    return r


def launch_cost(fn, make_args, sizes=(2 ** 10, 2 ** 14, 2 ** 18, 2 ** 22)) -> dict:
    """For a kernel wrapper ``fn(*make_args(n))`` at each size n: the kernel time the course's timer reports
    (the host's launch cost hidden behind a GPU-side wait), ``triton.testing.do_bench``'s median (each call
    issued as PyTorch code issues it, launch included when the kernel is shorter than the launch), and the
    host's own time per call (back-to-back calls, one synchronise). GPU only."""
    from ...timing import back_to_back_ms, bench, do_bench_ms
    res = {}
    for n in sizes:
        args = make_args(n)
        kernel_ms = bench(lambda: fn(*args))
        paid_ms = do_bench_ms({"call": lambda: fn(*args)})["call"]
        res[n] = {"kernel_ms": kernel_ms, "do_bench_ms": paid_ms,
                  "host_ms": back_to_back_ms(lambda: fn(*args), 200)["wall_ms"]}
    return res


def launch_inputs(n: int) -> list:
    """The LayerNorm backward's inputs at ``n`` elements, rows of 1024 (launch cost at each size)."""
    return ln_inputs(max(1, n // 1024), 1024, seed=n)


def show_launch_cost(add_layernorm_backward):
    """The LayerNorm backward at a few sizes: where the launch, not the kernel, sets the time."""
    if not DEVICE.on_gpu:
        print("No GPU: launch cost is a GPU matter (the interpreter runs kernels in Python). On an H100 "
              "(assets/bench/lesson07.md) a Triton launch costs tens of microseconds of host time, longer than "
              "the kernel itself below about a million elements.")
        return {}
    res = launch_cost(add_layernorm_backward, launch_inputs)
    for n, r in res.items():
        print(f"{n:>9} elements: kernel {r['kernel_ms'] * 1e3:7.1f} us (course timer), do_bench "
              f"{r['do_bench_ms'] * 1e3:7.1f} us, host {r['host_ms'] * 1e3:7.1f} us per call")
    return res


_SHIPPED: dict = {}
SHIPPED = "CUDA graphs (reduce-overhead)"  # the suffix of the contenders compiled with mode="reduce-overhead"


def shipped_step_of(forward):
    """``forward``'s training step as a program would ship it when the host is the bound: torch.compile with
    mode="reduce-overhead", which captures the compiled forward and backward in CUDA graphs and replays them (a
    replay costs the host microseconds, not a launch per kernel). Compiled once per function; each call starts a
    new step for the graphs (``cudagraph_mark_step_begin``: the previous step's outputs may be overwritten)."""
    def make():
        with _quiet_compile():
            return torch.compile(forward, fullgraph=True, dynamic=False, mode="reduce-overhead")
    compiled = _once_per_function(_SHIPPED, forward, make)

    def step(x, p, dout, h):
        torch.compiler.cudagraph_mark_step_begin()
        return with_grads(compiled, x, p, dout, h)
    return step


def find_host_cost(add_layernorm_backward, d: int = 1024, rows: int = 4096, top: int = 8) -> dict:
    """Section 6's exercise: one LayerNorm backward call of yours timed three ways (the course timer, do_bench, the
    host's time per call), then where the host's time goes (cProfile: the functions with the most time of their own).
    Without a GPU the kernels run in the interpreter, which is then most of the host's time: the table still shows
    your wrapper's own lines, but the numbers say nothing about a GPU."""
    from ...profiling import host_breakdown
    from ...timing import host_us
    if not DEVICE.on_gpu:
        d, rows = 64, 8
    inputs = ln_inputs(rows, d, seed=d)
    call = lambda: add_layernorm_backward(*inputs)  # noqa: E731
    if DEVICE.on_gpu:  # section 6's three clocks (launch_cost), at this one size
        t = launch_cost(add_layernorm_backward, lambda n: inputs, sizes=(rows * d,))[rows * d]
        res = {"kernel_us": t["kernel_ms"] * 1e3, "do_bench_us": t["do_bench_ms"] * 1e3, "host_us": t["host_ms"] * 1e3}
        print(f"d = {d}, {rows} rows: kernel {res['kernel_us']:.1f} us (course timer), do_bench {res['do_bench_us']:.1f}"
              f" us, host {res['host_us']:.1f} us per call")
    else:
        res = {"host_us": host_us(call, n=5, rounds=3)}
        print(f"No GPU: the interpreter runs the kernels on the host ({res['host_us']:.0f} us a call at d = {d}, "
              f"{rows} rows); the table shows where, your wrapper's lines among them.")
    res["rows"] = host_breakdown(call, calls=300 if DEVICE.on_gpu else 3, top=top)
    print(f"{'where the host spends a call (cProfile, own time)':<58} {'calls':>6} {'us':>8} {'share':>6}")
    for r in res["rows"]:
        print(f"{r['where'][:58]:<58} {r['calls']:6.1f} {r['own_us']:8.1f} {r['share']:6.0%}")
    return res


def step_contenders(block_forward=None) -> dict:
    """name -> training-step callable(x, params, dout, n_heads) of each way to run the block (GPU), with, on a GPU,
    both compiled steps also as shipped with CUDA graphs (``shipped_step_of``)."""
    fns = {"eager + SDPA": lambda x, p, dout, h: with_grads(_sdpa_forward, x, p, dout, h),
           "torch.compile(eager + SDPA)": lambda x, p, dout, h: compiled_sdpa_step_of(None)(x, *p, dout, h)}
    if DEVICE.on_gpu:
        fns[f"torch.compile(eager + SDPA), {SHIPPED}"] = lambda x, p, dout, h: shipped_step_of(_sdpa_forward)(
            x, p, dout, h)
    if block_forward is not None:
        fns["yours, eager"] = lambda x, p, dout, h: with_grads(block_forward, x, p, dout, h)
        fns["yours, compiled"] = lambda x, p, dout, h: step_through_compile(block_forward, x, *p, dout, h)
        if DEVICE.on_gpu:  # after step_through_compile's checks have run on the same function (the first call)
            fns[f"yours, compiled, {SHIPPED}"] = lambda x, p, dout, h: shipped_step_of(block_forward)(x, p, dout, h)
    return fns


def step_calls(fns: dict, s: Shape = GPU_SHAPE, graphs: bool = True) -> dict:
    """name -> callable() of each contender's training step on one set of inputs, each called once (Inductor
    compiles here, not in a timed round); with ``graphs`` each step also captured in a CUDA graph and replayed,
    "NAME in a CUDA graph" (what removing the host's launch cost buys a host-bound step)."""
    dev = DEVICE.torch_device
    x, params, dout, H = unpack(block_inputs(torch.Generator(dev).manual_seed(3), s, torch.float16, dev))
    calls = {n: (lambda f=f: f(x, params, dout, H)) for n, f in fns.items()}
    for call in calls.values():
        call()
    if graphs:
        for n in list(calls):
            if n.endswith(SHIPPED):
                continue  # already CUDA graphs: torch.compile's own cannot be captured inside another
            replay = cuda_graph_of(calls[n])
            if replay is not None:
                calls[f"{n} in a CUDA graph"] = replay
    return calls


def cuda_graph_of(step):
    """``step`` captured once in a CUDA graph; the returned callable replays it (same inputs, same outputs'
    memory), or None where capture fails."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        return graph.replay
    except Exception:  # noqa: BLE001 - a step that cannot be captured is shown without
        return None


def time_step_calls(calls: dict, rounds: int) -> tuple[dict, dict]:
    """name -> median ms of each step call as the graded steps time it (the host's time hidden), and name -> ms
    by do_bench (launches paid)."""
    from ...timing import time_steps
    timed, paid = time_steps(calls, rounds)
    return {n: timed[n] for n in calls}, paid


def compare_steps(block_forward, rounds: int = 3):
    """The capstone's comparison: eager + SDPA, torch.compile of it, yours eager and compiled, and each replayed
    from a CUDA graph; by the course timer as the step is graded (the host's time hidden) and by do_bench (paid)."""
    if not DEVICE.on_gpu:
        print("No GPU: the comparison needs one. assets/bench/lesson07.md has an H100's numbers.")
        return {}
    calls = step_calls(step_contenders(block_forward), GPU_SHAPE, graphs=True)
    res, paid = time_step_calls(calls, rounds)
    base, base_paid = res["eager + SDPA"], paid["eager + SDPA"]
    print(f"{'':>58}  GPU work (graded)             with launches (do_bench)")
    for n, ms in res.items():
        print(f"{n:>58}: {ms:.3f} ms ({base / ms:.2f}x eager + SDPA)   {paid[n]:.3f} ms "
              f"({base_paid / paid[n]:.2f}x)")
    return res


def two_stage(rows: int = 24, programs: int = 4, cols: int = 8):
    """The two-stage reduction of dweight, as a picture (see widgets.py)."""
    from .widgets import two_stage_reduction
    return two_stage_reduction(rows=rows, programs=programs, cols=cols)


def going_further() -> None:
    from ...device import explain_extensions
    rows = [
        ("torch.library.triton_op + wrap_triton: Inductor launches your kernel from its own code, with no custom "
         "op's dispatch (50-75 us a call on an H100's host); on an H200 (2026-11-29, docs/PERFORMANCE.md) the "
         "lesson's step then took 1.91 ms by do_bench without CUDA graphs, against 3.50 with custom ops, 1.86 for "
         "eager + SDPA and 2.45 for torch.compile of it. Cast "
         "float scalars with tl.cast(x, tl.float32), not x.to(): Inductor passes them as fp64 and traces the kernel "
         "with Python floats to find what it writes, which x.to() defeats; it then copied around every launch and "
         "the compiled gradients came out wrong (assets/bench/lesson07_triton_op_inductor/)",
         DEVICE.on_gpu, "needs a GPU: Inductor cannot trace an interpreted kernel"),
        ("a fused cross-entropy (the logits never written in full), as Liger-Kernel does", True, ""),
        ("RMSNorm forward and backward: the same two-stage reduction with one statistic", True, ""),
        ("bf16 end to end", DEVICE.supports_bf16(), "needs sm_80+; the interpreter has no bf16"),
    ]
    explain_extensions(rows)

