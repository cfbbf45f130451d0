"""autograder/benchmarks/pyspy_summary.py on a profile whose counts are known by hand."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "autograder" / "benchmarks"))
import pyspy_summary  # noqa: E402

G = 'process 1:"python3 autograder/benchmarks/class_grading.py"'
Z = 'process 2:"python3 zygote.py"'
W = 'process 3:"python3 zygote.py"'
PROFILE = "\n".join([
    f"{G};main (class_grading.py:1);compare (kernellab/compare.py:90) 5",
    f"{G};{Z};<module> (kernellab/grading/processes/zygote.py:423);_preload (kernellab/grading/processes/zygote.py:90) 4",
    f"{G};{Z};{W};main (kernellab/grading/worker/child.py:112);_find_and_load (<frozen importlib._bootstrap>:1360) 3",
    f"{G};{Z};{W};main (kernellab/grading/worker/child.py:216);compile (triton/compiler/compiler.py:246);"
    "triton_key (triton/runtime/cache.py:297) 6",
    f"{G};{Z};{W};main (kernellab/grading/worker/child.py:216);compile (triton/compiler/compiler.py:324) 2",
    f"{G};{Z};{W};main (kernellab/grading/judge/judge.py:95);replay (kernellab/replay.py:22) 1",
]) + "\n"


def test_samples_are_grouped_by_process_and_activity(tmp_path):
    path = tmp_path / "pyspy.txt"
    path.write_text(PROFILE)
    out = pyspy_summary.summarise(str(path))
    assert "total samples 21" in out
    lines = {line.split()[0]: line.split()[1] for line in out.splitlines() if line[:1].isalpha() and " " in line}
    assert lines["worker"] == "11" and lines["grader"] == "5" and lines["zygote-preload"] == "4"
    assert lines["judge"] == "1"
    assert "triton_key samples in workers: 6" in out and "triton_key samples in judges: 0" in out
    worker = out.split("--- worker")[1].split("---")[0]
    assert [ln.split()[0] for ln in worker.strip().splitlines()[1:]] == ["triton-compile", "import"]
