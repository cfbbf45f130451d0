"""The device the course runs on: a CUDA GPU, or Triton's CPU interpreter with small shapes."""
from __future__ import annotations

import dataclasses
import platform

import torch

from . import _env


@dataclasses.dataclass(frozen=True)
class Device:
    on_gpu: bool
    name: str
    capability: tuple[int, int] | None
    sms: int | None
    torch_version: str
    triton_version: str
    driver: str | None

    @property
    def torch_device(self) -> str:
        return "cuda" if self.on_gpu else "cpu"

    @property
    def cc(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}" if self.capability else "cpu"

    def supports_bf16(self) -> bool:
        return bool(self.capability and self.capability >= (8, 0))

    def supports_fp8(self) -> bool:
        return bool(self.capability and self.capability >= (8, 9))

    def supports_tma(self) -> bool:
        return bool(self.capability and self.capability >= (9, 0))

    def size(self, gpu: int, cpu: int) -> int:
        """Pick a problem size: the interpreter runs each program in Python, so it gets small ones."""
        return gpu if self.on_gpu else cpu

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["capability"] = list(self.capability) if self.capability else None
        return d


def _detect() -> Device:
    import triton  # safe: _env has already chosen the mode

    if _env.ON_GPU:
        props = torch.cuda.get_device_properties(0)
        try:
            import subprocess
            # one line per GPU (the same driver): the first
            driver = (subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10,
            ).stdout.split() or [None])[0]
        except Exception:
            driver = None
        return Device(True, props.name, (props.major, props.minor), props.multi_processor_count,
                      torch.__version__, triton.__version__, driver)
    return Device(False, f"CPU ({platform.machine()}), Triton interpreter", None, None,
                  torch.__version__, triton.__version__, None)


DEVICE = _detect()


def fingerprint(dev: Device = DEVICE) -> str:
    if dev.on_gpu:
        return (f"{dev.name} | {dev.cc} | {dev.sms} SMs | torch {dev.torch_version} | "
                f"triton {dev.triton_version}")
    return (f"no GPU: Triton interpreter on the CPU (small shapes, no speed grading) | "
            f"torch {dev.torch_version} | triton {dev.triton_version}")


def abilities(dev: Device = DEVICE) -> list[tuple[str, bool, str]]:
    """(feature, available, why not) for what the lessons' extensions need."""
    cc = dev.capability or (0, 0)
    where = dev.cc if dev.on_gpu else "the CPU interpreter"
    return [
        # Triton lowers tl.dot to tensor cores from sm_80; on a T4 it runs on the FMA units (right, slower)
        ("tensor-core tl.dot (fp16)", dev.on_gpu and cc >= (8, 0), f"needs sm_80+; {where} computes it without"),
        ("bf16", dev.supports_bf16(), f"needs sm_80+; {where} has no bf16"),
        ("TF32 tl.dot on fp32", dev.on_gpu and cc >= (8, 0), f"needs sm_80+ ({where})"),
        ("FP8", dev.supports_fp8(), f"needs sm_89+ ({where})"),
        ("TMA", dev.supports_tma(), f"needs sm_90 ({where})"),
    ]


def explain_extensions(rows: list) -> None:
    """Print each ungraded extension (name, runs here?, why not) as 'try it' or 'skipped - why'."""
    for name, ok, why in rows:
        print(f"{'✓ try it' if ok else '✗ skipped'}: {name}" + ("" if ok else f" - {why} (this machine: {DEVICE.cc})"))


def setup() -> Device:
    """The notebooks' setup call: print the fingerprint and what this device can and cannot do."""
    print(fingerprint())
    print("can: " + (", ".join(n for n, ok, _ in abilities() if ok) or "correctness checks only") +
          " | cannot: " + (", ".join(n for n, ok, _ in abilities() if not ok) or "-"))
    return DEVICE
