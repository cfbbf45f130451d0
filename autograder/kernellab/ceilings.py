"""The learner's device ceilings, measured on their machine: copy bandwidth and fp16 matmul rate.

Datasheet numbers are leads; these measurements are what rooflines and floors use. Results
are cached per GPU model in ~/.cache/kernellab so that every lesson shows the same roofline.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib

import torch

from .device import DEVICE


@dataclasses.dataclass
class Ceilings:
    copy_gbps: float | None  # bytes read + bytes written per second, / 1e9
    fp16_tflops: float | None  # dense fp16 matmul through torch (cuBLAS), fp32 accumulate
    measured: bool
    device: str

    @property
    def ridge(self) -> float | None:
        """Arithmetic intensity (FLOP/byte) where memory time equals compute time."""
        if self.copy_gbps and self.fp16_tflops:
            return self.fp16_tflops * 1e12 / (self.copy_gbps * 1e9)
        return None

    def bound(self, intensity: float) -> str:
        ridge = self.ridge or EXAMPLE.ridge
        return "memory" if intensity < ridge else "compute"

    def attainable(self, intensity: float) -> float:
        """The best FLOP/s a kernel of this intensity can reach under these ceilings: the lower roof."""
        return min(self.fp16_tflops * 1e12, intensity * self.copy_gbps * 1e9)

    def summary(self) -> str:
        if not self.measured:
            return ("No GPU: nothing measured. For the plots the course uses a T4's datasheet numbers "
                    f"as an example ({EXAMPLE.copy_gbps:.0f} GB/s, {EXAMPLE.fp16_tflops:.0f} fp16 TFLOP/s).")
        return (f"{self.device}: copy {self.copy_gbps:,.0f} GB/s, fp16 matmul {self.fp16_tflops:,.0f} TFLOP/s "
                f"-> ridge point {self.ridge:,.0f} FLOP/byte")


# Illustration only, used when there is no GPU: a T4's datasheet (320 GB/s, 65 fp16 TFLOP/s).
EXAMPLE = Ceilings(320.0, 65.0, False, "NVIDIA T4 (datasheet example)")

_cache: dict = {}


def _cache_file() -> pathlib.Path:
    root = pathlib.Path(os.environ.get("KERNELLAB_CACHE", pathlib.Path.home() / ".cache" / "kernellab"))
    safe = "".join(ch if ch.isalnum() else "_" for ch in DEVICE.name)
    return root / f"ceilings-{safe}.json"


def _measure_copy() -> float:
    from .timing import bench
    n = 1 << 28 if torch.cuda.get_device_properties(0).total_memory > 16e9 else 1 << 26
    src = torch.randn(n // 4, device="cuda").view(torch.int32).repeat(4)  # random bits, 4n bytes
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / (ms * 1e-3) / 1e9


def _measure_matmul() -> float:
    from .timing import bench
    n = 8192 if torch.cuda.get_device_properties(0).total_memory > 16e9 else 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    ms = bench(lambda: a @ b)
    return 2 * n ** 3 / (ms * 1e-3) / 1e12


def measure_ceilings(refresh: bool = False, quiet: bool = False) -> Ceilings:
    """Measure (once per GPU model, then cached) and print the device's ceilings."""
    if not DEVICE.on_gpu:
        c = Ceilings(None, None, False, DEVICE.name)
    elif "c" in _cache and not refresh:
        c = _cache["c"]
    else:
        f = _cache_file()
        c = None
        if f.exists() and not refresh:
            try:
                c = Ceilings(**json.loads(f.read_text()))
            except Exception:  # noqa: BLE001 - a bad cache is re-measured
                c = None
        if c is None:
            c = Ceilings(_measure_copy(), _measure_matmul(), True, DEVICE.name)
            torch.cuda.empty_cache()  # its buffers (~2.5 GB) go back to the GPU: a grading judge may need them
            try:
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(json.dumps(dataclasses.asdict(c)))
            except OSError:
                pass
        _cache["c"] = c
    if not quiet:
        print(c.summary())
    return c


def ceilings_known() -> bool:
    """Whether measure_ceilings would only read them (this process has them, or the cache file does), or has
    nothing to measure (no GPU)."""
    return not DEVICE.on_gpu or "c" in _cache or _cache_file().exists()


def plotted() -> tuple[Ceilings, Ceilings]:
    """(this device's ceilings, the ones to draw): without a GPU nothing is measured, and the plots use
    EXAMPLE's datasheet numbers."""
    c = measure_ceilings(quiet=True)
    return c, (c if c.measured else EXAMPLE)
