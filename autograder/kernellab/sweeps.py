"""Size sweeps: where a kernel stops paying for its launch and starts paying for its bytes."""
from __future__ import annotations

import contextlib

import sys

import torch

from .device import DEVICE

LAUNCH_US_EXAMPLE = 5.0  # a typical kernel launch + tiny-kernel time, for the CPU-mode model curve


def measure_sweep(add, log2_sizes, rounds: int = 3) -> list[dict]:
    """GB/s (3 x 4 bytes per fp32 element) of ``add`` and of torch.add at 2^k elements, interleaved."""
    from tqdm.auto import tqdm

    from .timing import interleaved
    rows = []
    for k in tqdm(list(log2_sizes), desc="sizes", file=sys.stdout):
        n = 1 << k
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        t = interleaved({"kernel": lambda: add(x, y), "torch": lambda: torch.add(x, y)}, rounds)
        rows.append({"n": n, "kernel_gbps": 12 * n / (t["kernel"] * 1e-3) / 1e9,
                     "torch_gbps": 12 * n / (t["torch"] * 1e-3) / 1e9, "kernel_ms": t["kernel"], "torch_ms": t["torch"]})
    return rows


def plot_sweep(rows: list[dict], copy_gbps: float, title: str, label: str = "your add", ax=None):
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    ns = [r["n"] for r in rows]
    for key, name, style in (("kernel_gbps", label, "o-"), ("torch_gbps", "torch.add", "s--"),
                             ("model_gbps", "model", "o-")):
        if key in rows[0]:
            ax.semilogx(ns, [r[key] for r in rows], style, label=name, base=2)
    ax.axhline(copy_gbps, color="grey", ls=":", lw=1, label=f"copy bandwidth {copy_gbps:,.0f} GB/s")
    return _label(ax, "elements n (fp32)", "GB/s (3 x 4 x n bytes per call)", title)


def _label(ax, xlabel: str, ylabel: str, title: str):
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.figure.tight_layout()
    return ax


def bandwidth_sweep(add, max_log2: int | None = None, plot: bool = True) -> list[dict]:
    """The lesson's sweep: measured on a GPU (2^10 .. 2^max), a labelled model curve without one."""
    from .ceilings import EXAMPLE, measure_ceilings

    if DEVICE.on_gpu:
        free = torch.cuda.mem_get_info()[0]
        top = max_log2 or min(28, int(free // 40).bit_length() - 1)
        rows = measure_sweep(add, range(10, top + 1))
        copy = measure_ceilings(quiet=True).copy_gbps
        title = f"add on {DEVICE.name}"
    else:
        copy = EXAMPLE.copy_gbps
        rows = []
        for k in range(10, 29):
            n, b = 1 << k, 3 * (1 << k) * 4
            rows.append({"n": n, "model_gbps": b / (LAUNCH_US_EXAMPLE * 1e-6 + b / (copy * 1e9)) / 1e9})
        title = f"model, not a measurement: {LAUNCH_US_EXAMPLE:g} us launch + {copy:.0f} GB/s (no GPU here)"
    if plot:
        import matplotlib.pyplot as plt
        plot_sweep(rows, copy, title)
        plt.show()
    return rows


_PAID: list = []  # non-empty inside paying_launches()


@contextlib.contextmanager
def paying_launches():
    """Inside the block (``kernellab bench``), time_contenders also measures each contender with its launches paid
    (``{name}_do_bench_ms``, ``{name}_host_us``: timing.launch_paid); outside it (a notebook's sweep), it does not."""
    _PAID.append(True)
    try:
        yield
    finally:
        _PAID.pop()


def time_contenders(fns: dict, inputs: list, nbytes: int | None = None, rounds: int = 3) -> dict:
    """``{name}_ms`` (and ``{name}_gbps`` for ``nbytes``) of each ``fn(*inputs)``, contenders interleaved.
    timing.bench keeps each contender's first call (compilation, autotuning) out of the numbers."""
    from .timing import interleaved, launch_paid
    calls = {k: (lambda f=f: f(*inputs)) for k, f in fns.items()}
    t = interleaved(calls, rounds)
    out = {f"{k}_ms": t[k] for k in fns}
    if nbytes is not None:
        out |= {f"{k}_gbps": nbytes / (t[k] * 1e-3) / 1e9 for k in fns}
    if _PAID:
        for k, v in launch_paid(calls).items():
            out[f"{k}_do_bench_ms"], out[f"{k}_host_us"] = v["do_bench_ms"], v["host_us"]
    return out


def checked_candidates(candidates: dict, error, what: str, tol: float = 1e-2) -> tuple[dict, dict, dict]:
    """Run each candidate (name -> fn()) once before a timing run and compare what it returns with a reference
    (``error(out)``; ``what`` names the reference). Returns (name -> fn of those to time, name -> error of each that
    ran, name -> why each other one is not timed): one that raises (out of shared memory or registers, say) or whose
    error is over ``tol`` is recorded, not timed."""
    keep, errs, fails = {}, {}, {}
    for name, fn in candidates.items():
        try:
            errs[name] = error(fn())
        except Exception as exc:
            fails[name] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
            continue
        if errs[name] > tol:
            fails[name] = f"output differs from {what}: {errs[name]:.2e}"
        else:
            keep[name] = fn
    return keep, errs, fails


def ab_row(fixed: dict, candidates: dict, error, what: str, flops: float, rounds: int,
           baseline: str = "cuDNN") -> dict:
    """One shape of a GPU A/B: the ``candidates`` (name -> fn()) checked against a reference first
    (``checked_candidates``), then they and the ``fixed`` contenders (``baseline`` among them) timed by
    ``triton.testing.do_bench`` medians (warmup 10, rep 60 ms), interleaved over ``rounds``. The row: each one's
    median and rounds (ms), its TFLOP/s for ``flops`` per call, ``vs_<baseline>`` (the baseline's time over its own:
    above 1 is faster), and the candidates' errors and failures."""
    from triton.testing import do_bench

    from .timing import interleaved
    kept, errs, fails = checked_candidates(candidates, error, what)
    fns = fixed | kept
    timed = interleaved(fns, rounds, timer=lambda f: do_bench(f, warmup=10, rep=60, return_mode="median"))
    ms = {n: timed[n] for n in fns}
    return {"do_bench_ms": ms, "rounds_ms": {n: timed[f"{n}_all"] for n in fns},
            f"vs_{baseline.lower()}": {n: ms[baseline] / t for n, t in ms.items() if n != baseline},
            "tflops": {n: flops / t / 1e9 for n, t in ms.items()}, "errors": errs, "failed": fails}


def matmul_sweep(fns: dict, sizes, rounds: int = 3) -> list[dict]:
    """TFLOP/s of each ``name -> fn(a, b)`` on fp16 matmuls, contenders interleaved. ``sizes``: square sizes N,
    or (M, N, K) shapes; each row has its ``shape`` label ("MxNxK"), and ``n`` for a square one."""
    from tqdm.auto import tqdm

    rows = []
    for size in tqdm(list(sizes), desc="sizes", file=sys.stdout):
        m, n, k = (size, size, size) if isinstance(size, int) else size
        a, b = torch.randn(m, k, device="cuda").half(), torch.randn(k, n, device="cuda").half()
        t = time_contenders(fns, [a, b], rounds=rounds)
        row = {"n": n} if isinstance(size, int) else {}
        rows.append(row | {"shape": f"{m}x{n}x{k}"}
                    | {f"{key}_tflops": 2 * m * n * k / (t[f"{key}_ms"] * 1e-3) / 1e12 for key in fns})
    return rows


def plot_shape_bars(rows: list[dict], title: str, ax=None):
    """Grouped bars of each contender's TFLOP/s per shape (matmul_sweep's rows): for shapes that no single
    axis orders, such as misaligned ones beside squares."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    keys = [k for k in rows[0] if k.endswith("_tflops")]
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        ax.bar([x + i * width for x in range(len(rows))], [r[key] for r in rows], width=width,
               label=key[:-len("_tflops")])
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))], [r["shape"] for r in rows], fontsize=8)
    return _label(ax, "M x N x K", "TFLOP/s (fp16, 2 M N K per call)", title)


def plot_series(rows: list[dict], x: str, suffix: str, xlabel: str, ylabel: str, title: str, ax=None,
                line: tuple | None = None):
    """One line per ``*{suffix}`` key of ``rows`` against ``rows[x]`` (log2 axis); ``line`` = (value, label)
    draws a ceiling."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    xs = [r[x] for r in rows]
    for i, key in enumerate(k for k in rows[0] if k.endswith(suffix)):
        ax.plot(xs, [r[key] for r in rows], "o-" if i == 0 else "s--", label=key[:-len(suffix)])
    ax.set_xscale("log", base=2)
    if line is not None:
        ax.axhline(line[0], color="grey", ls=":", lw=1, label=line[1])
    return _label(ax, xlabel, ylabel, title)


def plot_matmul_sweep(rows: list[dict], title: str, ax=None):
    return plot_series(rows, "n", "_tflops", "M = N = K (fp16 inputs, fp32 accumulation)", "TFLOP/s (2 N^3 per call)",
                       title, ax)


def plot_gbps(rows: list[dict], x: str, title: str, ax=None):
    """GB/s of each contender against a row length, with this GPU's copy bandwidth as the roof."""
    from .ceilings import measure_ceilings
    line = None
    if DEVICE.on_gpu:
        copy = measure_ceilings(quiet=True).copy_gbps
        line = (copy, f"copy {copy:,.0f} GB/s")
    return plot_series(rows, x, "_gbps", "row length (columns)", "GB/s (bytes a fused kernel must move)", title,
                       ax, line)
