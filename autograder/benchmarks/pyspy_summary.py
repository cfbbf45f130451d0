"""Summarise a py-spy raw profile of a class grading (`KL_PYSPY=all bash autograder/benchmarks/gpu_class_parts.sh ...`, which
samples every process): on-CPU samples grouped by the process they came from (a worker runs grading/worker/child.py, a
judge grading/judge/judge.py; the zygote's imports; the grading process), then, within workers, judges and the
grading process, by what they were doing (any module import, Triton's compiler, its autotuner, or else the
innermost frame), and the samples of Triton's cache key in workers and judges.

    python3 autograder/benchmarks/pyspy_summary.py pyspy-s01.txt [pyspy-s02.txt ...]

assets/gpu/class_grading_2349utc/pyspy_summary.md was written from its output.
"""
import collections
import sys

# What a stack was doing, by the first pattern found in it (the order matters: a compile imports, too).
ACTIVITIES = [("_preload", "preload"), ("triton/compiler/compiler.py", "triton-compile"),
              ("autotuner.py", "autotune"), ("_find_and_load", "import"), ("torch/serialization.py", "serialization")]


def stacks(path: str):
    """(processes, frames, samples) of each line of a raw profile: 'process ...;frame;frame N'."""
    for line in open(path):
        line = line.rstrip()
        if not line:
            continue
        stack, n = line.rsplit(" ", 1)
        parts = stack.split(";")
        yield ([p for p in parts if p.startswith("process ")],
               [p for p in parts if not p.startswith(("process ", "thread "))], int(n))


def kind_of(procs: list, frames: list) -> str:
    s = ";".join(frames)
    if "grading/worker/child.py" in s:
        return "worker"
    if "grading/judge/judge.py" in s:
        return "judge"
    if "zygote.py" in s:
        return "zygote-preload" if "_preload" in s else "zygote-other"
    return "grader" if len(procs) == 1 else "other"


def activity(frames: list) -> str:
    s = ";".join(frames)
    return next((name for pat, name in ACTIVITIES if pat in s), frames[-1] if frames else "?")


def summarise(path: str) -> str:
    kinds, what, key = collections.Counter(), collections.defaultdict(collections.Counter), collections.Counter()
    for procs, frames, n in stacks(path):
        k = kind_of(procs, frames)
        kinds[k] += n
        what[k][activity(frames)] += n
        if "triton_key" in ";".join(frames):
            key[k] += n
    total = sum(kinds.values())
    out = [f"total samples {total}"] + [f"{k:40s} {v:8d} {100 * v / total:5.1f}%" for k, v in kinds.most_common()]
    for k in ("worker", "judge", "grader"):
        out.append(f"--- {k} {kinds[k]}")
        out += [f"   {name[:90]:90s} {v:7d} {100 * v / max(1, kinds[k]):5.1f}%" for name, v in what[k].most_common(15)]
    out += [f"triton_key samples in {k}s: {key[k]}" for k in ("worker", "judge")]
    return "\n".join(out)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(f"== {p}\n{summarise(p)}\n")
