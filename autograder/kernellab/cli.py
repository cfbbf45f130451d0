"""``kernellab`` command line: build the student notebooks, run the GPU benchmark."""
from __future__ import annotations

import argparse
import sys


def _split(text: str) -> list | None:
    return [s for s in text.split(",") if s] or None


def _lessons(names) -> list | None:
    """Lesson ids from what was typed (ids or numbers, a list or one comma-separated string); a name that is no
    lesson stops the command (kernellab.lessons.lesson_ids)."""
    from .lessons import lesson_ids
    return lesson_ids(_split(names) if isinstance(names, str) else names) or None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="kernellab", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="regenerate notebooks/ from solutions/ (nbgrader generate_assignment)")
    b.add_argument("lessons", nargs="*", help="lesson ids or numbers (default: all)")
    be = sub.add_parser("bench", help="time the solution kernels against their baselines (GPU)")
    be.add_argument("--out", default="assets/bench", help="folder for the report and charts")
    be.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    be.add_argument("--lessons", default="", help="comma-separated lesson ids or numbers, e.g. 02,07 (default: all)")
    g = sub.add_parser("gpu-report", help="bench + execute and autograde every lesson on this GPU")
    g.add_argument("--out", default="assets/gpu", help="folder for the reports")
    g.add_argument("--students", default="", help="comma-separated submissions to grade (default: all)")
    g.add_argument("--lessons", default="", help="comma-separated lesson ids or numbers (default: all)")
    g.add_argument("--no-bench", action="store_true", help="skip the benchmark")
    g.add_argument("--no-execute", action="store_true", help="skip executing the solution notebooks")
    g.add_argument("--merge", nargs="+", metavar="JSON", help="only write one report from these gpu_report.json files")
    r = sub.add_parser("regrade", help="grade the solution's problems N times in fresh processes: score and ratio spread")
    r.add_argument("--lesson", required=True, help="lesson id")
    r.add_argument("--problems", default="",
                   help="comma-separated grade_ids, or speed / untimed for either kind (default: all of the lesson)")
    r.add_argument("--jobs", type=int, default=1, help="untimed problems graded this many at a time (speed: always 1)")
    r.add_argument("--suffix", default="", help="added to the report's name, e.g. _h200")
    r.add_argument("--times", type=int, default=20, help="gradings per problem")
    r.add_argument("--notebook", default=None, help="a submitted notebook instead of the solution")
    r.add_argument("--entry", default=None, help="a corpus entry (kernellab corpus) instead of the solution")
    r.add_argument("--out", default="assets/gpu", help="folder for regrade_<lesson>.md and .json")
    rs = sub.add_parser("regrade-summary", help="one table over every regrade report in a folder")
    rs.add_argument("--dir", default="assets/gpu", help="the folder holding regrade_*.json")
    a = sub.add_parser("agree", help="execute each solution notebook and grade it: learner checks vs grade of record")
    a.add_argument("--lessons", default="", help="comma-separated lesson ids or numbers (default: all)")
    a.add_argument("--jobs", type=int, default=4, help="untimed problems graded this many at a time")
    a.add_argument("--out", default=None, help="folder for agreement.md (default: assets/gpu or assets/grading)")
    a.add_argument("--merge", nargs="+", metavar="JSON", help="only write one report from these agreement.json files")
    c = sub.add_parser("corpus", help="grade the cheat corpus and the honest controls (GPU entries need a GPU)")
    c.add_argument("--out", default=None,
                   help="folder for the report (default: assets/gpu for corpus_gpu.md, assets/grading for corpus_cpu.md)")
    c.add_argument("--only", default="", help="comma-separated entry names (default: all this machine can run)")
    c.add_argument("--gpu-only", action="store_true", help="only the entries that need a GPU")
    t = sub.add_parser("term", help="the instructor's term: preflight, autograde, feedback, export, report")
    t.add_argument("action", choices=["preflight", "autograde", "feedback", "export", "report"])
    t.add_argument("lesson", nargs="?", default=None, help="lesson id (all actions but export)")
    t.add_argument("--course", default=".", help="the nbgrader course folder (autograder/)")
    t.add_argument("--out", default=None, help="report: the HTML file (default reports/<lesson>.html)")
    t.add_argument("--jobs", type=int, default=None,
                   help="autograde: problems graded at a time into the result store (default: from the CPU cores "
                        "and GPU memory; a process that times always has its GPU alone)")
    t.add_argument("--gpus", default="all",
                   help="autograde: how many of this machine's GPUs to grade on ('all', the default, or a number)")
    t.add_argument("--ray", default=None, metavar="local|nodes|ADDRESS",
                   help="autograde: run the jobs on Ray (a grader per GPU), on a local Ray cluster of this machine ('local'), "
                        "on a Ray node per GPU of it, each with its share of the cores ('nodes'), or on the cluster at "
                        "ADDRESS (needs pip install \"kernellab[cluster]\")")
    t.add_argument("--force", action="store_true",
                   help="autograde: grade again even what the result store holds")
    gr = sub.add_parser("grade", help="grade one submitted notebook by the grade of record (worker + judge)")
    gr.add_argument("notebook", help="the submitted .ipynb")
    gr.add_argument("--json", default=None, help="write {problems: {id: {points, max, message}}, device} here")
    gr.add_argument("--problems", default="", help="comma-separated grade_ids (default: every problem)")
    gr.add_argument("--secret-file", default=None, help="the course secret (default: KERNELLAB_SECRET or "
                                                          "autograder/.kernellab_secret)")
    gr.add_argument("--student", default=None, help="the student's name, for the seeds (default: the file's name)")
    gr.add_argument("--lesson", default=None, help="lesson id (default: the one the file name ends with)")
    sub.add_parser("fingerprint", help="print this machine's one-line device fingerprint")
    args = ap.parse_args(argv)
    if args.cmd == "build":
        from .build import build
        build(_lessons(args.lessons))
    elif args.cmd == "bench":
        from .bench import run_bench
        run_bench(args.out, quick=args.quick, lessons=_lessons(args.lessons))
    elif args.cmd == "gpu-report":
        from .gpu_report import main as gpu_main, merge
        if args.merge:
            merge(args.merge, args.out)
            return 0
        gpu_main(args.out, _split(args.students), bench=not args.no_bench, execute=not args.no_execute,
                 lessons=_lessons(args.lessons))
    elif args.cmd == "regrade":
        import pathlib

        from .grading.instructor.regrade import regrade, write
        notebook, name = args.notebook, args.lesson + args.suffix
        if args.entry:  # a deliberately different submission, e.g. a mid-speed one
            import tempfile

            from .grading import corpus
            notebook = pathlib.Path(tempfile.mkdtemp()) / f"{args.entry}.ipynb"
            corpus.write_notebook(corpus.by_name(args.entry), notebook)
            name = f"{args.lesson}_{args.entry}{args.suffix}"
        res = regrade(args.lesson, _split(args.problems), args.times, notebook, jobs=args.jobs,
                      after_each=lambda r: write(r, name, pathlib.Path(args.out)))
        print(write(res, name, pathlib.Path(args.out)))
    elif args.cmd == "corpus":
        import pathlib

        from .grading import corpus
        names = _split(args.only)
        res = corpus.run([e for e in corpus.ENTRIES if (not names or e.name in names) and (e.gpu or not args.gpu_only)])
        from .device import DEVICE
        out = args.out or ("assets/gpu" if DEVICE.on_gpu else "assets/grading")
        print(corpus.write(res, pathlib.Path(out)))
        return 0 if all(r["ok"] for r in res) else 1
    elif args.cmd == "regrade-summary":
        import pathlib

        from .grading.instructor.regrade import summary
        print(summary(pathlib.Path(args.dir)))
    elif args.cmd == "agree":
        import pathlib

        from .device import DEVICE
        from .grading.instructor.agreement import agree, merge, write
        from .lessons import LESSONS
        out = pathlib.Path(args.out or ("assets/gpu" if DEVICE.on_gpu else "assets/grading"))
        if args.merge:
            print(merge(args.merge, out))
            return 0
        res = agree(_lessons(args.lessons) or list(LESSONS), args.jobs, out)
        print(write(res, out))
        return 0 if all(r["state"] != "disagree" for r in res["rows"]) else 1
    elif args.cmd == "term":
        from .grading.instructor.term import main as term_main
        if args.action != "export" and not args.lesson:
            ap.error(f"term {args.action} needs a lesson id")
        gpus = None if str(args.gpus).lower() == "all" else int(args.gpus)
        return term_main(args.action, args.lesson, args.course, args.out, args.jobs, args.force, gpus, args.ray)
    elif args.cmd == "grade":
        from .grading.judge.grade_one import main as grade_main
        return grade_main(args.notebook, args.json, _split(args.problems), args.secret_file, args.student,
                          args.lesson)
    elif args.cmd == "fingerprint":
        from .device import fingerprint
        print(fingerprint())
    return 0


if __name__ == "__main__":
    sys.exit(main())
