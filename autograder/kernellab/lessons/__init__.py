"""One folder per lesson, ``lNN_<name>/``, each a package with the same files:

- ``problems.py``: its graded problems (shared by learner checks and the grade of record), their references
  and the learner-facing check functions the notebook calls (``from kernellab.lessons import lesson01 as L``);
- ``bench.py``: its GPU benchmark (``kernellab bench``);
- ``widgets.py``: its interactive pictures.

What lessons 04-06 share (attention's references, SDPA baselines, graded cases) is ``attention.py``. The
notebooks' names ``lesson01`` .. ``lesson10`` stay: ``kernellab.lessons.lesson01`` is the module
``kernellab.lessons.l01_roofline_vector_add.problems`` (imported on first use). See docs/ARCHITECTURE.md.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

FOLDERS = {"01_roofline_vector_add": "l01_roofline_vector_add", "02_tiled_matmul": "l02_tiled_matmul",
           "03_fused_softmax_layernorm": "l03_fused_softmax_layernorm", "04_flash_attention": "l04_flash_attention",
           "05_flash_attention_backward": "l05_flash_attention_backward", "06_profile_first": "l06_profile_first",
           "07_ship_it": "l07_ship_it", "08_hopper": "l08_hopper",
           "09_serve_it": "l09_serve_it", "10_mixture_of_experts": "l10_mixture_of_experts"}
# lesson id -> the name its notebook imports (``from kernellab.lessons import lesson01 as L``)
LESSONS = {lid: f"lesson{lid[:2]}" for lid in FOLDERS}
_ALIASES = {name: FOLDERS[lid] for lid, name in LESSONS.items()}


def lesson_ids(names) -> list:
    """Lesson ids, in the order given, from full ids or their numbers ("07", "7"), as the command line takes them; a
    name that is no lesson stops the command with the list of lessons (a typo must not run nothing and exit 0)."""
    out = []
    for name in names or ():
        hits = [lid for lid in FOLDERS if name == lid or (name.isdigit() and int(name) == int(lid[:2]))]
        if not hits:
            raise SystemExit(f"kernellab: no lesson {name!r}; the lessons: "
                             + ", ".join(f"{lid[:2]} ({lid})" for lid in FOLDERS))
        out.append(hits[0])
    return out


def lesson_module(lesson_id: str):
    """The lesson's problems module (what its notebook calls ``L``)."""
    return importlib.import_module(f"{__name__}.{FOLDERS[lesson_id]}.problems")


def problems_of(lesson_id: str) -> dict:
    """grade_id -> Problem for one lesson."""
    return {p.id: p for p in lesson_module(lesson_id).PROBLEMS}


def __getattr__(name: str):
    """``lesson01`` .. ``lesson10``: each lesson's problems module under the name its notebook uses, imported
    on first use and then also importable as ``kernellab.lessons.lesson01``."""
    if name not in _ALIASES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_ALIASES[name]}.problems")
    sys.modules[f"{__name__}.{name}"] = module
    globals()[name] = module
    return module


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes ``import kernellab.lessons.lesson01`` (and ``from kernellab.lessons.lesson01 import X``) give the
    lesson's problems module itself, not a copy: one module object, whichever name imported it first."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.rpartition(".")
        if package == __name__ and name in _ALIASES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(f"{__name__}.{_ALIASES[spec.name.rpartition('.')[2]]}.problems")
        spec.loader_state = module.__spec__  # the import system sets __spec__ to this alias; exec_module puts it back
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.append(_AliasFinder())
