"""Lesson 10: mixture of experts - top-k routing and the permutation, a grouped GEMM in one launch, the fused
MoE MLP forward and the grouped GEMM's backward.

problems.py: graded problems and the checks the notebook calls; bench.py: the GPU benchmark; widgets.py:
the interactive pictures."""
