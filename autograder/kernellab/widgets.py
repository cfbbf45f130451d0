"""Every lesson's interactive pictures under one name, ``kernellab.widgets`` (each lives in its lesson's
folder, lessons/lNN_*/widgets.py; what they share is widgets_base.py)."""
from __future__ import annotations

from .lessons.l01_roofline_vector_add.widgets import ROOFLINE_OPS, roofline_explorer  # noqa: F401
from .lessons.l02_tiled_matmul.widgets import tile_order, wave_footprint  # noqa: F401
from .lessons.l03_fused_softmax_layernorm.widgets import online_softmax_steps, online_softmax_trace  # noqa: F401
from .lessons.l04_flash_attention.widgets import attention_tiles  # noqa: F401
from .lessons.l05_flash_attention_backward.widgets import backward_tiles  # noqa: F401
from .lessons.l06_profile_first.widgets import amdahl, kernel_payoff  # noqa: F401
from .lessons.l07_ship_it.widgets import two_stage_reduction  # noqa: F401
from .lessons.l08_hopper.widgets import warp_timeline  # noqa: F401
from .lessons.l09_serve_it.widgets import split_waves  # noqa: F401
from .lessons.l10_mixture_of_experts.widgets import tile_schedule  # noqa: F401
