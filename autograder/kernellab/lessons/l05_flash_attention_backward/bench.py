"""Lesson 05 has no benchmark of its own: its backward pass is timed by lesson 04's benchmark
(lessons/l04_flash_attention/bench.py), in the same run and on the same tensors as the forward, because the
backward needs the forward's output and log-sum-exp. That run writes both lesson04.md and lesson05.md."""
