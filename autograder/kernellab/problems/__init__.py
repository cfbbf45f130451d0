"""Graded problems: the same definitions drive the learner's checks and the grade of record."""
