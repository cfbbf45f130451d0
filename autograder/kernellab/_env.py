"""Decide GPU or CPU-interpreter mode *before* anything imports Triton.

Triton reads ``TRITON_INTERPRET`` when a kernel is decorated with ``@triton.jit``; the course
sets it before ``import triton`` so that no kernel can ever be built in the wrong mode.
This module must stay free of Triton imports: ``kernellab/__init__`` runs it first.
"""
from __future__ import annotations

import os
import sys

import torch

ENV_FLAG = "TRITON_INTERPRET"


class ModeError(RuntimeError):
    """Raised when Triton was imported in the wrong mode; the message says how to recover."""

    def _render_traceback_(self):  # IPython shows this instead of a traceback
        return [str(self)]


def _interpret_requested() -> bool:
    return os.environ.get(ENV_FLAG, "0").lower() in ("1", "true", "on", "yes")


def _too_old() -> bool:
    """A notebook that needs a newer GPU than this one (lesson 08 sets KERNELLAB_MIN_CAPABILITY=9.0 before
    importing kernellab: TMA and FP8 tensor cores need Hopper) runs its kernels in the interpreter instead."""
    want = os.environ.get("KERNELLAB_MIN_CAPABILITY", "")
    if not want or not torch.cuda.is_available():
        return False
    try:
        major, minor = (int(x) for x in want.split(".", 1))
    except ValueError:
        return False
    return torch.cuda.get_device_capability(0) < (major, minor)


def choose_mode() -> bool:
    """Return True when kernels run on a CUDA GPU, False for the CPU interpreter."""
    forced_cpu = os.environ.get("KERNELLAB_FORCE_CPU", "0") == "1" or _too_old()
    has_gpu = torch.cuda.is_available() and not forced_cpu and not _interpret_requested()
    if has_gpu:
        return True
    if "triton" in sys.modules and not _interpret_requested():
        raise ModeError(
            "Triton was imported before kernellab on a machine without a usable GPU, so its kernels "
            "would be compiled for a GPU that is not there. Restart the kernel (Kernel > Restart) and "
            "run the setup cell first: it imports kernellab, which switches Triton to its CPU "
            "interpreter before Triton loads."
        )
    os.environ[ENV_FLAG] = "1"
    return False


ON_GPU = choose_mode()
