"""How busy this machine's GPUs were while a class was graded: ``nvidia-smi`` sampled every second.

``utilization.gpu`` is the share of the sample period in which some kernel ran on the GPU (NVIDIA's own
definition), so it says whether grading kept the GPU fed, not how hard each kernel worked it.
"""
from __future__ import annotations

import shutil
import subprocess
import threading
import time


class GpuUsage:
    """``with GpuUsage() as u: ...`` then ``u.mean()`` (percent over every sample of every GPU; None with no
    GPU or no nvidia-smi), ``u.per_gpu()`` and ``u.samples`` (GPU index -> list of percents). ``gpus``: only
    these GPUs (nvidia-smi indices or UUIDs, as CUDA_VISIBLE_DEVICES names them), so a run given one GPU of two
    is not averaged with the idle other."""

    def __init__(self, interval_s: float = 1.0, gpus: list[str] | None = None):
        self.interval_ms = max(100, int(interval_s * 1000))
        self.gpus = [str(g) for g in gpus] if gpus else None
        self.samples: dict[int, list[float]] = {}
        self.times: dict[int, list[float]] = {}  # when each sample was read (wall clock), beside ``samples``
        self._proc = None
        self._thread = None

    def __enter__(self):
        from kernellab.device import DEVICE
        exe = shutil.which("nvidia-smi")
        if not DEVICE.on_gpu or exe is None:
            return self
        try:
            self._proc = subprocess.Popen(
                [exe, "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits", f"-lms={self.interval_ms}",
                 *(["-i", ",".join(self.gpus)] if self.gpus else [])],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return self
        self._thread = threading.Thread(target=self._read, daemon=True, name="kl-gpu-usage")
        self._thread.start()
        return self

    def _read(self) -> None:
        for line in self._proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            try:
                gpu, pct = int(parts[0]), float(parts[1])
            except (ValueError, IndexError):
                continue
            self.samples.setdefault(gpu, []).append(pct)
            self.times.setdefault(gpu, []).append(time.time())

    def __exit__(self, *exc):
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._thread.join(timeout=5)
        return False

    def mean(self) -> float | None:
        values = [v for vals in self.samples.values() for v in vals]
        return round(sum(values) / len(values), 1) if values else None

    def per_gpu(self) -> dict:
        """GPU index -> its mean percent (did the jobs spread over every GPU?)."""
        return {g: round(sum(v) / len(v), 1) for g, v in sorted(self.samples.items()) if v}

    def series(self) -> dict:
        """GPU index (as text) -> [[time, percent], ...]: each sample with the middle of the interval it covers
        (nvidia-smi reports the share of the last interval a kernel ran), to set against who held the GPU then."""
        half = self.interval_ms / 2000
        return {str(g): [[round(t - half, 2), v] for t, v in zip(self.times.get(g, []), vals)]
                for g, vals in sorted(self.samples.items())}


# What a timing's GPU was doing, read before and after it (the judge's record): clocks, power, temperature and the
# driver's reasons for holding the clocks down. The reasons field was renamed in newer drivers; the older name next.
_STATE_FIELDS = ("clocks.sm", "clocks.mem", "power.draw", "temperature.gpu")
_REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
_STATE_NAMES = ("sm_mhz", "mem_mhz", "power_w", "temp_c")


def own_gpu() -> str:
    """The GPU this process computes on, as nvidia-smi names it: the first of its CUDA_VISIBLE_DEVICES, else 0."""
    import os
    return os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"


def gpu_state(gpu: str | None = None) -> dict:
    """{sm_mhz, mem_mhz, power_w, temp_c, reasons} of one GPU (``gpu``: an nvidia-smi index or UUID; default the
    first of this process's CUDA_VISIBLE_DEVICES, else 0), or {} where nvidia-smi is missing or says nothing."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    if gpu is None:
        gpu = own_gpu()
    for fields in [(*_STATE_FIELDS, r) for r in _REASONS] + [_STATE_FIELDS]:
        try:
            done = subprocess.run([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", gpu],
                                  capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return {}
        values = [v.strip() for v in done.stdout.strip().splitlines()[0].split(",")] if done.stdout.strip() else []
        if done.returncode != 0 or len(values) != len(fields):
            continue  # a field this driver does not know: try without it
        state = {}
        for name, value in zip((*_STATE_NAMES, "reasons"), values):
            try:
                state[name] = value if name == "reasons" else float(value)
            except ValueError:
                state[name] = None  # "[N/A]"
        return state
    return {}
