"""Lesson 03: fused softmax, online softmax, and residual add + LayerNorm.

problems.py: graded problems and the checks the notebook calls; bench.py: the GPU benchmark; widgets.py:
the interactive pictures."""
