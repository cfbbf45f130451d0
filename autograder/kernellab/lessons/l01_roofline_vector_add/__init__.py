"""Lesson 01: the roofline, with a vector add and a fused silu_gate.

problems.py: graded problems and the checks the notebook calls; bench.py: the GPU benchmark; widgets.py:
the interactive pictures."""
