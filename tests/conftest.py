import os
import pathlib
import sys

# The suite runs without a GPU: force the CPU interpreter before anything imports triton.
os.environ.setdefault("KERNELLAB_FORCE_CPU", "1")
os.environ["KERNELLAB_CACHE"] = str(pathlib.Path(__file__).resolve().parent / ".cache")
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "autograder"))
sys.path.insert(0, str(ROOT / "tests"))

import kernellab  # noqa: E402,F401  (sets TRITON_INTERPRET before triton loads)
