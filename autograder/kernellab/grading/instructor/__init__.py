"""nbgrader's side and the instructor's commands: the autograde preprocessors, ``kernellab term``, dry-run
courses, submissions for tests, regrade stability and the learner-check agreement."""
