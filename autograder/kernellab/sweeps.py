"""Size sweeps: where a kernel stops paying for its launch and starts paying for its bytes."""
from __future__ import annotations

import sys

import torch

from .device import DEVICE

LAUNCH_US_EXAMPLE = 5.0  # a typical kernel launch + tiny-kernel time, for the CPU-mode model curve


def bandwidth_sweep(add, max_log2: int | None = None, plot: bool = True) -> list[dict]:
    """Measure GB/s (3 x n x 4 bytes per call, fp32) of ``add`` and of torch's add at each size."""
    import matplotlib.pyplot as plt

    from .ceilings import EXAMPLE, measure_ceilings

    rows = []
    if DEVICE.on_gpu:
        from tqdm.auto import tqdm

        from .timing import bench
        free = torch.cuda.mem_get_info()[0]
        top = max_log2 or min(28, int((free // 40)).bit_length() - 1)
        for k in tqdm(range(10, top + 1), desc="sizes", file=sys.stdout):
            n = 1 << k
            x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            mine = bench(lambda: add(x, y))
            ref = bench(lambda: torch.add(x, y))
            b = 3 * n * 4
            rows.append({"n": n, "yours_gbps": b / mine / 1e6, "torch_gbps": b / ref / 1e6,
                         "yours_ms": mine, "torch_ms": ref})
            del x, y
        copy = measure_ceilings(quiet=True).copy_gbps
        title = f"add on {DEVICE.name}"
    else:
        copy = EXAMPLE.copy_gbps
        for k in range(10, 29):
            n, b = 1 << k, 3 * (1 << k) * 4
            t = LAUNCH_US_EXAMPLE * 1e-6 + b / (copy * 1e9)
            rows.append({"n": n, "model_gbps": b / t / 1e9})
        title = f"model, not a measurement: {LAUNCH_US_EXAMPLE:g} us launch + {copy:.0f} GB/s (no GPU here)"
    if plot:
        fig, ax = plt.subplots(figsize=(7, 3.8))
        ns = [r["n"] for r in rows]
        for key, label in (("yours_gbps", "your add"), ("torch_gbps", "torch.add"), ("model_gbps", "model")):
            if key in rows[0]:
                ax.semilogx(ns, [r[key] for r in rows], "o-", label=label, base=2)
        ax.axhline(copy, color="grey", ls="--", lw=1, label=f"copy bandwidth {copy:,.0f} GB/s")
        ax.set_xlabel("elements n (fp32)")
        ax.set_ylabel("GB/s (3 x 4 x n bytes per call)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        plt.show()
    return rows
