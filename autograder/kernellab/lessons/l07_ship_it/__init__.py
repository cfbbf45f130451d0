"""Lesson 07: ship it - a fused LayerNorm backward, custom ops that torch.compile traces whole, launch cost, and
the block's training step compiled.

problems.py: graded problems and the checks the notebook calls; bench.py: the GPU benchmark; widgets.py: the
two-stage reduction as a picture."""
