"""Starting and confining grading processes: the zygote that forks workers and judges from a warm interpreter, and
the Landlock sandbox a worker (and a judge that interprets kernels) applies to itself."""
