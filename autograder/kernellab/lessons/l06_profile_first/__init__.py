"""Lesson 06: profile a transformer block first, then replace what the profile names.

problems.py: graded problems and the checks the notebook calls; bench.py: the GPU benchmark; widgets.py:
the interactive pictures."""
