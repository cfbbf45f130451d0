"""CPU cores kept for timing while a class is graded: where the machine has cores to spare, each GPU's timed
process gets cores of its own and every untimed grading process (compiling, autotuning, checking) runs on the
others, so a timed step that the host launches never waits for a core (grading/classroom/slots.py keeps the GPUs)."""
from __future__ import annotations

import os

# Per GPU, for its timed process; KERNELLAB_TIMING_CORES=0 keeps none (every grading process runs anywhere).
TIMING_CORES = int(os.environ.get("KERNELLAB_TIMING_CORES", "2"))
SPARE_CORES = 4  # at least this many left for everything else, or no cores are kept


def affinity() -> set:
    """The CPU cores this process may run on: its affinity (``taskset``, a Slurm or container cpuset), or every
    core where there is none (not Linux)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def usable() -> int:
    """How many CPU cores this process may run on (``affinity``), not the machine's count, which a job given 8
    cores of a 128-core node would otherwise fill with jobs."""
    return len(affinity()) or 1


def timing_cores(index: int, gpus: int, cores=None) -> set:
    """The CPU cores kept for GPU ``index``'s timed process: the highest-numbered ``TIMING_CORES`` not kept for a
    lower index, of ``cores`` (default: the ones this process may use). None are kept where fewer than
    ``SPARE_CORES`` would be left for the rest."""
    cores = sorted(affinity() if cores is None else cores)
    if gpus < 1 or TIMING_CORES < 1 or len(cores) < gpus * TIMING_CORES + SPARE_CORES:
        return set()
    top = len(cores) - index * TIMING_CORES
    return set(cores[top - TIMING_CORES:top])


def untimed_cores(gpus: int, cores=None) -> set:
    """The cores every untimed grading process runs on: all but those kept for timing."""
    cores = set(affinity() if cores is None else cores)
    return cores - set().union(*(timing_cores(i, gpus, cores) for i in range(gpus)))


def threads_each(jobs: int, gpus: int, cores=None) -> int:
    """CPU threads each of ``jobs`` grading processes running at once may use: the untimed cores shared out over
    them, at least one. Timing needs no more: it launches kernels from one thread."""
    return max(1, len(untimed_cores(gpus, cores)) // max(1, jobs))


def pin(pid: int, cores: set) -> bool:
    """Move every thread of process ``pid`` to ``cores`` (its children inherit them). False where that cannot be
    done: no such process any more, no ``sched_setaffinity`` (not Linux), or no cores given."""
    if not cores or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    done = False
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cores)
            done = True
        except OSError:  # a thread that ended meanwhile, or the process itself
            pass
    return done
