"""The grade of record: every graded problem in its own processes, judged by trusted code.

The trust boundary is the package layout:

- ``worker/``     runs learner cells (and nothing it returns is believed): it records what a graded call did.
- ``judge/``      never runs learner Python: the grading process (``harness``), the judge process that replays a
                  worker's record on its own inputs, checks and times it, the result store and the course secret.
                  ``tests/test_architecture.py`` keeps it from importing anything that executes notebook cells.
- ``processes/``  starting and confining those processes (the zygote, Landlock).
- ``classroom/``  grading a whole class: the queue, GPU slots, pausing, cores, Ray, GPU-busy sampling.
- ``instructor/`` nbgrader's side and the instructor's commands: the autograde plugin, ``term``, dry runs,
                  regrades, the learner-check agreement.
- ``corpus/``     the cheat corpus and honest controls, one entry a file.
"""
