"""KernelLab: the helpers behind the course notebooks.

Import order matters: ``_env`` decides GPU vs CPU interpreter and sets TRITON_INTERPRET
before Triton is imported anywhere (see _env.py).
"""
from . import _env  # noqa: F401  (must be first)
from .device import DEVICE, setup, fingerprint  # noqa: E402
from .ceilings import measure_ceilings  # noqa: E402
from .roofline import plot_roofline, record_point  # noqa: E402
from . import lessons, timing, tuning  # noqa: E402
from .compat import (ensure_triton_allocator, patch_interpreter_autotune, patch_interpreter_device_calls,  # noqa: E402
                     patch_interpreter_index, patch_interpreter_overflow_checks)

if not DEVICE.on_gpu:
    patch_interpreter_index()
    patch_interpreter_autotune()
    patch_interpreter_device_calls()
    patch_interpreter_overflow_checks()
else:
    ensure_triton_allocator()  # device-side TMA descriptors (lesson 08) need scratch memory at launch
from .tuning import autotune  # noqa: E402
from .launch import fast  # noqa: E402

__version__ = "0.1.0"
__all__ = ["DEVICE", "setup", "fingerprint", "measure_ceilings", "plot_roofline", "record_point", "lessons", "autotune", "fast"]
