"""One module per lesson: its graded problems (shared by learner checks and the grade of record)
and the learner-facing check functions the notebook calls."""
from __future__ import annotations

import importlib

LESSONS = {"01_roofline_vector_add": "lesson01", "02_tiled_matmul": "lesson02",
           "03_fused_softmax_layernorm": "lesson03", "04_flash_attention": "lesson04",
           "05_flash_attention_backward": "lesson05",
           "06_profile_first": "lesson06"}


def lesson_module(lesson_id: str):
    return importlib.import_module(f"{__name__}.{LESSONS[lesson_id]}")


def problems_of(lesson_id: str) -> dict:
    """grade_id -> Problem for one lesson."""
    return {p.id: p for p in lesson_module(lesson_id).PROBLEMS}
