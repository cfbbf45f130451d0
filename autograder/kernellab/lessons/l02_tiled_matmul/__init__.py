"""Lesson 02: a tiled, autotuned matmul and its fused bias + GELU epilogue.

problems.py: graded problems and the checks the notebook calls; bench.py: the GPU benchmark; widgets.py:
the interactive pictures."""
