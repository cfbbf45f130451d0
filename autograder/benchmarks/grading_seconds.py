"""Seconds per problem, the grade of record's old path (one child runs the learner's code and the checks)
beside the judge/worker path (worker records, judge replays), on this machine, for the solution notebooks.

    python autograder/benchmarks/grading_seconds.py [LESSON ...] [--json OUT.json] [--judge-only]

``--judge-only``: the judge/worker path alone (today's grade of record), each problem's seconds cold: every grading
process has an empty Triton cache of its own. ``KERNELLAB_COMPILE_THREADS=1`` grades without compiling ahead
(grading/worker/compile_ahead.py); each row's ``compile_ahead`` says what the dry pass did.
"""
import json
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "autograder"))


def main(argv):
    out = argv[argv.index("--json") + 1] if "--json" in argv else None
    lessons = [a for a in argv if not a.startswith("--") and a != out] or ["01_roofline_vector_add"]
    modes = ("1",) if "--judge-only" in argv else ("0", "1")
    import kernellab  # noqa: F401
    from kernellab.device import DEVICE
    from kernellab.grading.judge.grade_one import grade_file
    rows = []
    for lesson in lessons:
        path = f"solutions/{lesson}/{lesson}.ipynb"
        walls, phases, aheads = {}, {}, {}
        for mode in modes:
            os.environ["KERNELLAB_REPLAY"] = mode
            logs = tempfile.mkdtemp()
            res = grade_file(path, logs_dir=logs, progress=False, secret_file=None)
            for p, r in res["problems"].items():
                rec = json.loads((pathlib.Path(logs) / pathlib.Path(path).stem / lesson / p / "result.json").read_text())
                secs = sum(v for k, v in rec.items() if k.endswith("wall_s") and isinstance(v, (int, float)))
                walls.setdefault(p, {})[mode] = (round(secs, 1), r["points"], r["max"])
                aheads.setdefault(p, {})[mode] = rec.get("compile_ahead")  # the worker's dry pass, if it made one
                # where each process's seconds went: [phase, seconds until the next phase], worker then judges
                phases.setdefault(p, {})[mode] = {
                    k.removesuffix("phases").rstrip("_") or "worker":
                        [[a[0], round(float(b[1]) - float(a[1]), 2)] for a, b in zip(v, v[1:])]
                    for k, v in rec.items() if k.endswith("phases") and isinstance(v, list) and len(v) > 1}
        for p, w in walls.items():
            old = w.get("0", (None, None, None))
            rows.append({"lesson": lesson, "problem": p, "old_s": old[0], "judge_s": w["1"][0],
                         "old_points": old[1], "judge_points": w["1"][1], "max": w["1"][2],
                         "phases": phases[p]["1"], "compile_ahead": aheads[p]["1"]})
    print(f"{DEVICE.name}")
    print(f"{'lesson':<28} {'problem':<26} {'old s':>6} {'judge s':>8} {'old pts':>8} {'judge pts':>9}")
    for r in rows:
        old_pts = f"{r['old_points']:>5g}/{r['max']:<3g}" if r["old_points"] is not None else f"{'-':>9}"
        print(f"{r['lesson']:<28} {r['problem']:<26} {'-' if r['old_s'] is None else r['old_s']:>6} {r['judge_s']:>8} "
              f"{old_pts}{r['judge_points']:>6g}/{r['max']:<3g}")
    if out:
        pathlib.Path(out).write_text(json.dumps({"device": DEVICE.as_dict(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
