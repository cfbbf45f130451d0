"""The side of the grade of record that never runs learner Python: the grading process (``harness``: inputs from
the secret seed, references, the worker and judge processes, scores), the judge process (``judge``: a worker's
record replayed on fresh buffers, checked and timed), one notebook graded (``grade_one``), the result store and
the course secret. Kept from importing anything that executes notebook cells by tests/test_architecture.py."""
