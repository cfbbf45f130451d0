"""One corpus entry: the submission it makes from the solution, what it attacks and the grade it must get."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kernellab.device import DEVICE

L1, L2, L3 = "01_roofline_vector_add", "02_tiled_matmul", "03_fused_softmax_layernorm"
L4, L5, L6 = "04_flash_attention", "05_flash_attention_backward", "06_profile_first"
L7 = "07_ship_it"
L9 = "09_serve_it"
L10 = "10_mixture_of_experts"


@dataclasses.dataclass
class Entry:
    name: str
    lesson: str
    problem: str  # the grade_id it attacks
    threat: str  # what it tries (a row of GRADING.md's threat table, or one found here)
    edit: Callable  # solution texts (grade_id -> source) -> overrides (grade_id -> new source)
    # "0": gains nothing; "full": every point; "earned": the speed points its speed earns; "kernel": a forgery the
    # judge's replay undoes by construction: graded as the kernel it recorded, its ratio at most ``max_value``
    expect: str = "0"
    gpu: bool = False  # needs a GPU (timing, streams, a real illegal memory access)
    says: str = ""  # a phrase the grade's message must contain (the defence that caught it)
    budget_s: float | None = None  # a shorter per-phase budget (endless loops)
    max_value: float | None = None  # "kernel": the most its measured ratio may be (what its own kernel earns)
    # Defeated only by the worker's confinement (grading/processes/sandbox.py): on a kernel without Landlock it gains its
    # points, and the report says so rather than pass it.
    confined: bool = False
    interpreter: bool = False  # only where kernels are interpreted (numpy views of tensors in CPU memory)

    @property
    def honest(self) -> bool:
        return self.expect not in ("0", "kernel")


def runs_here(e: Entry) -> bool:
    """Whether this machine can try the entry: GPU entries need one, interpreter entries need its absence."""
    return not e.interpreter if DEVICE.on_gpu else not e.gpu
