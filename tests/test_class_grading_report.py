"""autograder/benchmarks/class_grading.py's bookkeeping, on made-up records: which grading processes held a GPU while another
timed on it (the GPU run's proof that timing was never shared), and the speed-under-load table."""
import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("class_grading", ROOT / "autograder" / "benchmarks" / "class_grading.py")
CG = importlib.util.module_from_spec(spec)
spec.loader.exec_module(CG)


def _record(logs, student, problem, **fields):
    d = logs / student / "01_roofline_vector_add" / problem
    d.mkdir(parents=True)
    (d / "result.json").write_text(json.dumps({"student": student, "problem": problem, **fields}))


def test_holds_beside_a_timing_are_counted_per_node_and_gpu(tmp_path):
    # a judge that shared GPU 0 from 0 to 1, then timed alone from 1 to 2
    _record(tmp_path, "a", "speed", gpu_slot=0, holds=[[0, 1, False]],
            judge_gpu_slot=0, judge_holds=[[0, 1, False], [1, 2, True]])
    _record(tmp_path, "b", "untimed", gpu_slot=0, holds=[[0.5, 1.0, False], [2.0, 3, False]])  # touches, no overlap
    _record(tmp_path, "c", "untimed", gpu_slot=1, holds=[[1.2, 1.8, False]])  # another GPU: allowed
    assert CG.timing_overlaps(tmp_path) == (1, 0)
    _record(tmp_path, "d", "untimed", gpu_slot=0, holds=[[1.5, 2.5, False]])  # beside the timing: counted
    _record(tmp_path, "e", "untimed", node="other", gpu_slot=0, holds=[[1.5, 2.5, False]])  # another node's GPU 0
    assert CG.timing_overlaps(tmp_path) == (1, 1)
    # Paused for the timing (grading/classroom/pause.py): beside it only while not paused, so not counted
    _record(tmp_path, "f", "untimed", gpu_slot=0, holds=[[0.8, 3.0, False]], paused=[[0.9, 2.1]])
    assert CG.timing_overlaps(tmp_path) == (1, 1)
    _record(tmp_path, "g", "untimed", gpu_slot=0, holds=[[0.8, 3.0, False]], paused=[[1.2, 2.1]])  # paused too late
    assert CG.timing_overlaps(tmp_path) == (1, 2)
    assert CG._minus((0, 10), [[2, 3], [5, 12]]) == [(0, 2), (3, 5)]


def test_speed_under_load_sets_solution_copies_against_quiet_regrades():
    res = {"quiet": {"lesson": "01_roofline_vector_add", "values": {"add_bandwidth": [1.0, 1.02, 0.98]}},
           "ratios": {"queue": {"01_roofline_vector_add/solution-1/add_bandwidth": 0.99,
                                "01_roofline_vector_add/load-3/add_bandwidth": 1.01,
                                "01_roofline_vector_add/honest-x/add_bandwidth": 0.5,  # not the solution
                                "02_tiled_matmul/solution-1/matmul_speed": 0.9},
                      "serial": {"02_tiled_matmul/solution-1/matmul_speed": 0.9}}}  # graded no lesson 01
    lines = CG.under_load(res)
    quiet, queue = res["under_load"]["add_bandwidth"]["quiet"], res["under_load"]["add_bandwidth"]["queue"]
    assert quiet == {"n": 3, "min": 0.98, "median": 1.0, "max": 1.02, "spread": 0.04}
    assert queue["n"] == 2 and queue["min"] == 0.99 and queue["max"] == 1.01
    assert any("| add_bandwidth | queue | 2 |" in line for line in lines)
    assert "serial" not in res["under_load"]["add_bandwidth"] and not any("| serial |" in line for line in lines)
    assert CG.under_load({"ratios": {}}) == [] and CG.speed_spread([]) == {"n": 0}
    # the quiet regrades ran on one GPU model: a mode on another is not set against them
    res["quiet"]["modes"] = ["queue"]
    res["modes"] = {"queue": {"gpu_model": "A"}, "queue_2gpu": {"gpu_model": "B"}}
    res["ratios"]["queue_2gpu"] = {"01_roofline_vector_add/solution-1/add_bandwidth": 1.3}
    CG.under_load(res)
    assert "queue" in res["under_load"]["add_bandwidth"] and "queue_2gpu" not in res["under_load"]["add_bandwidth"]


def test_process_seconds_and_what_stands_behind_each_ratio(tmp_path):
    state = {"before": {"sm_mhz": 1980.0, "reasons": "0x0"}, "after": {"sm_mhz": 1755.0, "reasons": "0x4"}}
    _record(tmp_path, "a", "add_bandwidth", kind="speed", wall_s=3.0,
            slot_wait_s=1.0, holds=[[0, 1, False], [1, 2, True]], judge_wall_s=2.0, judge_slot_wait_s=0.5,
            details={"value": 1.0, "cand_ms_median": 0.25, "base_ms_median": 0.26}, gpu_state=state)
    _record(tmp_path, "b", "add_correct", kind="correctness", wall_s=4.0,
            holds=[[0, 4, False]], details={"value": None})
    # jobs_at_once: a held 0-2 and b 0-4, 6 s of jobs over the 4 s they spanned
    assert CG.process_seconds(tmp_path) == {"workers_alone": 1, "worker_s": 7.0, "slot_wait_s": 1.5, "judge_s": 2.0,
                                            "jobs_at_once": 1.5}
    # a job's span beyond its processes' walls and waits is the grading process's own work (7.5 s less 6.5)
    _record(tmp_path, "e", "fused_speed", kind="speed", wall_s=3.0, slot_wait_s=1.0, judge_wall_s=2.0,
            judge_slot_wait_s=0.5, job_span=[10.0, 17.5],
            phases=[["start", 10.0], ["compile", 10.5], ["alone", 11.0], ["alone-go", 11.4], ["compile", 11.5],
                    ["run", 12.9], ["done", 13.8], ["end", 14.0]],
            judge_phases=[["start", 15.0], ["alone", 15.5], ["alone-go", 15.5], ["run", 15.6], ["end", 16.6]])
    got = CG.process_seconds(tmp_path)
    assert got["job_s"] == 7.5 and got["grader_s"] == 1.0
    assert got["alone_phase_s"] == {"worker": {"alone-go": 0.1, "compile": 1.4, "run": 0.9, "done": 0.2},
                                    "judge": {"alone-go": 0.1, "run": 1.0}}
    assert CG.alone_phases([["start", 0.0], ["run", 1.0], ["end", 2.0]]) == {}  # never asked for its GPU alone
    # a tuning worker that gave its GPU back once tuned: its recording is not alone time
    assert CG.alone_phases([["start", 0.0], ["alone", 1.0], ["alone-go", 1.5], ["compile", 1.5], ["shared", 3.5],
                            ["shared-go", 3.5], ["compile", 3.5], ["run", 3.6], ["done", 8.0], ["end", 8.2]]) == \
        {"alone-go": 0.0, "compile": 2.0}
    _record(tmp_path, "c", "add_correct", kind="correctness", task_started=100.0, task_ended=104.0)  # Ray tasks
    _record(tmp_path, "d", "add_correct", kind="correctness", task_started=102.0, task_ended=110.0)
    got = CG.process_seconds(tmp_path)
    assert got["task_s"] == 12.0 and got["tasks_at_once"] == 1.2  # 12 s of tasks over the 10 s they spanned
    medians, states = CG._medians(tmp_path, "01_roofline_vector_add")
    assert medians == {"a/add_bandwidth": [0.25, 0.26]} and states == {"a/add_bandwidth": state}
    parts = [{"lessons": ["01_roofline_vector_add"], "per_lesson": 1, "header": None, "scores": {"queue": {}},
              "ratios": {"queue": {}}, "modes": {"queue": {"wall_s": 1.0, "students": 1, "problems": 1, "gpus": 1, "jobs": 2, "per_student_s": 1.0,
                                                          "gpu_util_mean": None}},
              "medians_ms": {"queue": {"01_roofline_vector_add/" + k: v for k, v in medians.items()}},
              **({"gpu_states": {"queue": {"01_roofline_vector_add/a/add_bandwidth": state}}} if i else {})}
             for i in range(2)]
    merged = CG.merge(parts)
    assert merged["gpu_states"]["queue"]["01_roofline_vector_add/a/add_bandwidth"] == state
    assert merged["medians_ms"]["queue"] == {"01_roofline_vector_add/a/add_bandwidth": [0.25, 0.26]}


def test_modes_name_their_gpus_and_unknown_ones_are_refused():
    assert CG.mode_spec("serial") == ("serial", None) and CG.mode_spec("ray_local") == ("ray", None)
    assert CG.mode_spec("queue_1gpu") == ("queue", 1) and CG.mode_spec("ray_2gpu") == ("ray", 2)
    assert CG.mode_spec("serial_1gpu") == ("serial", 1)  # serial grading on a machine of N-GPU modes
    # one GPU on a share of the machine's cores (run under taskset)
    assert CG.mode_spec("queue_1gpu_16cores") == ("queue", 1) and CG.mode_cores("queue_1gpu_16cores") == 16
    assert CG.mode_cores("queue_1gpu") is None
    for bad in ("queue_0gpu", "queue2gpu", "slurm_2gpu", "ray_gpu", "serial_2gpu", "queue_1gpu_0cores",
                "serial_1gpu_8cores"):
        try:
            CG.mode_spec(bad)
        except SystemExit as exc:
            assert bad in str(exc)
        else:
            raise AssertionError(f"{bad} was accepted")


def _part(mode, lesson, wall, students, scores, ratios, per_gpu=None, cores=32):
    return {"lessons": [lesson], "per_lesson": students, "header": None, "scores": {mode: scores},
            "ratios": {mode: ratios}, "modes": {mode: {
                "wall_s": wall, "students": students, "problems": len(scores), "gpus": CG.mode_spec(mode)[1] or 1,
                "jobs": 9, "per_student_s": wall / students, "gpu_util_mean": 10.0,
                "machine": {"gpu": "H", "gpus": 2, "cores": cores}, **({"gpu_util_per_gpu": per_gpu} if per_gpu else {})}}}


def test_a_second_gpu_is_set_against_one_gpu_of_the_same_machine(tmp_path):
    L1, L2 = "01_roofline_vector_add", "02_tiled_matmul"
    sc = {f"{L1}/s/p": 1.0, f"{L1}/s/q": 0.0}
    parts = [_part("serial", L1, 50.0, 1, {f"{L1}/s/p": 1.0}, {f"{L1}/s/q": 1.0}, cores=16),
             _part("queue_1gpu", L1, 100.0, 10, sc, {f"{L1}/s/q": 1.02}),
             _part("queue_1gpu", L2, 100.0, 10, {}, {}),
             # two GPUs: 1.8x the one-GPU queue's throughput, one ratio 5% off serial, GPU 1 busier
             _part("queue_2gpu", L1, 60.0, 10, sc, {f"{L1}/s/q": 1.05}, {"0": 10.0, "1": 20.0}),
             _part("queue_2gpu", L2, 51.1, 10, {}, {}, {"0": 30.0, "1": 30.0}),
             _part("ray_2gpu", L1, 150.0, 20, {**sc, f"{L1}/s/q": 1.0}, {})]
    res = CG.merge(parts)
    assert res["modes"]["queue_2gpu"]["machine"]["cores"] == 32
    assert res["modes"]["queue_2gpu"]["gpu_util_per_gpu"] == {"0": round((10 * 60 + 30 * 51.1) / 111.1, 1),
                                                               "1": round((20 * 60 + 30 * 51.1) / 111.1, 1)}
    text = CG.write(res, tmp_path)
    two, ray = res["more_gpus"]["queue_2gpu"], res["more_gpus"]["ray_2gpu"]
    assert two["throughput_vs_one_gpu"] == round(200 / 111.1, 2) and two["target"] == 1.7  # walls, not rounded s
    assert two["vs_serial"] == {"scores": 1, "scores_differ": 0, "ratios": 1, "max_ratio_diff": 0.05}
    assert two["vs_queue_1gpu"]["max_ratio_diff"] == round(0.03 / 1.02, 4)
    assert ray["throughput_vs_one_gpu"] == round(10.0 / 7.5, 2) and ray["vs_queue_1gpu"]["scores_differ"] == 1
    assert not res["scores_identical"] and res["pairs"]["queue_1gpu|ray_2gpu"]["scores_differ"] == 1
    row = next(line for line in text.splitlines() if line.startswith("| queue_2gpu | 2 |"))
    assert "1.80x" in row and "| yes |" in row and "5.0% of 1 (**no**)" in row and "2.9% of 1 (yes)" in row
    assert "| **no** | 1/1 | - | 1/2 **differ** | - |" in text  # ray_2gpu: too slow, one score differs
    assert ray["lessons"] == [L1] and two["lessons"] == [L1, L2]
    assert "| ray_2gpu | 2 | queue_1gpu | 01 | 7.5 | 10.0 | 1.33x |" in text  # Ray graded lesson 01 only: its row
    # a one-GPU lesson the mode did not grade does not move its comparison
    heavier = [dict(p, modes={m: dict(v, wall_s=300.0, per_student_s=30.0) for m, v in p["modes"].items()})
               if p["lessons"] == [L2] and "queue_1gpu" in p["modes"] else p for p in parts]
    res2 = CG.merge(heavier)
    CG.write(res2, tmp_path)
    assert res2["more_gpus"]["ray_2gpu"]["throughput_vs_one_gpu"] == round(10.0 / 7.5, 2)
    assert res2["more_gpus"]["queue_2gpu"]["throughput_vs_one_gpu"] == round(400 / 111.1, 2)
    assert "| queue_2gpu | H | 20 | 2 | 111.1 |" in text and "(" in text.split("| queue_2gpu | H | 20 |")[1].split("\n")[0]
    assert (tmp_path / "class_grading.png").stat().st_size > 5000 and "(class_grading.png)" in text
    # Serial grading on the two-GPU machine too (serial_1gpu): its modes are set against it, not the other machine's
    parts.append(_part("serial_1gpu", L1, 40.0, 1, {f"{L1}/s/p": 1.0}, {f"{L1}/s/q": 1.04}))
    res = CG.merge(parts)
    text = CG.write(res, tmp_path)
    assert CG.serial_for(res, "queue_2gpu") == "serial_1gpu" and CG.serial_for(res, "queue") == "serial"
    vs_serial = res["more_gpus"]["queue_2gpu"]["vs_serial"]["max_ratio_diff"]
    assert vs_serial in (round(0.01 / 1.04, 4), round(0.01 / 1.05, 4))  # 1.05 against 1.04, not serial's 1.0
    assert "against serial grading (`serial_1gpu`)" in text
    row = next(line for line in text.splitlines() if line.startswith("| queue_2gpu | H | 20 |"))
    assert f"| {111.1 / 20 / 40:.0%} |" in row  # of its own machine's serial time per submission
    assert res["modes"]["serial_1gpu"]["jobs"] == 1
    # another GPU model's run scores by its own speeds: not paired with these (its score differs, nothing says so)
    other = _part("queue", L1, 80.0, 10, {f"{L1}/s/p": 0.5}, {f"{L1}/s/q": 1.5})
    other["modes"]["queue"]["machine"] = {"gpu": "G", "gpus": 1, "cores": 16}
    res_g = CG.merge([p for p in parts if "ray_2gpu" not in p["modes"]] + [other])
    CG.write(res_g, tmp_path)
    assert res_g["scores_identical"] and not any("queue" in k.split("|") for k in res_g["pairs"])
    assert res_g["modes"]["queue"]["gpu_model"] == "G"
    # one GPU given half the cores too (each GPU with its share of them): a second comparison, in a row of its own
    share = [_part("queue_1gpu_16cores", L, 160.0, 10, sc if L == L1 else {}, {}, cores=16) for L in (L1, L2)]
    res_s = CG.merge(parts + share)
    text = CG.write(res_s, tmp_path)
    two = res_s["more_gpus"]["queue_2gpu"]
    assert two["throughput_vs_one_gpu"] == round(200 / 111.1, 2)  # still against all the cores first
    half = two["with_its_cores"]["queue_1gpu_16cores"]
    assert half["cores"] == 16 and half["throughput_vs_one_gpu"] == round(320 / 111.1, 2) and half["target"] == 1.7
    assert half["vs_queue_1gpu_16cores"] == {"scores": 2, "scores_differ": 0, "ratios": 0, "max_ratio_diff": 0.0}
    assert f"| queue_2gpu | 2 | queue_1gpu_16cores | all | 5.6 | 16.0 | {320 / 111.1:.2f}x | 1.7x | yes |" in text
    assert "`queue_1gpu_16cores` is the queue on one GPU given 16 of the machine's cores" in text
    # no one-GPU queue of the same machine: no section, rather than a comparison across machines
    del res["modes"]["queue_1gpu"]
    assert CG.more_gpus(res) == []


def test_what_bounds_a_part_and_how_far_its_processes_would_have_to_fall(tmp_path):
    """bounds(): each part's wall against A + W / c (alone seconds of its busiest GPU, process seconds, jobs), and for
    two GPUs against one the most W may be, in units of A, for 0.85 N of one GPU's throughput when N GPUs divide A by
    N and W grows as measured. Worked by hand: A1 = 20, W1 = 480, c 12 -> 18, W2 = 552 (1.15x):
    W1 (1.7 * 1.15 / 18 - 1 / 12) <= 20 * (1 - 0.85)  ->  W1 <= 3 / 0.025278 = 118.7 = 5.9 A1."""
    L1 = "01_roofline_vector_add"

    def with_records(part, alone, process, jobs, gpus=1):
        m = next(iter(part["modes"].values()))
        m.update(jobs=jobs, gpu_timeline={str(g): {"span_s": 50.0, "held_s": 49.0, "alone_s": alone - g}
                                          for g in range(gpus)},
                 process_s={"worker_s": process * 0.75, "judge_s": process * 0.25, "slot_wait_s": 3.0})
        return part
    parts = [with_records(_part("queue_1gpu", L1, 61.0, 10, {}, {}), 20.0, 480.0, 12),
             with_records(_part("queue_2gpu", L1, 42.0, 10, {}, {}), 11.0, 552.0, 18, gpus=2),
             _part("serial_1gpu", L1, 300.0, 1, {}, {})]
    res = CG.merge(parts)
    text = CG.write(res, tmp_path)
    assert "| 01_roofline_vector_add | queue_1gpu | 61.0 | 20.0 | 480 | 12 | 60.0 | 0.98 |" in text
    assert "| 01_roofline_vector_add | queue_2gpu | 42.0 | 11.0 | 552 | 18 | 41.7 | 0.99 |" in text  # the busier GPU
    assert "| serial_1gpu |" not in text.split("What bounds")[1].split("\n- ")[0]
    b = res["bounds"]["queue_2gpu"]
    assert b["process_growth"] == 1.15 and b["process_over_alone"] == 24.0 and b["jobs"] == [12, 18]
    assert b["most_process_over_alone_for_target"] == round(0.15 / (1.7 * 1.15 / 18 - 1 / 12), 1) == 5.9
    assert "W would have to be at most 5.9 times A (it is 24.0 times)" in text
    # with jobs that grow faster than the work (4x the jobs, the same process seconds), no cut of W is needed
    parts[1]["modes"]["queue_2gpu"].update(jobs=48, process_s={"worker_s": 480.0})
    res = CG.merge(parts)
    CG.write(res, tmp_path)
    assert res["bounds"]["queue_2gpu"]["most_process_over_alone_for_target"] is None


def test_gpu_busy_is_kept_per_gpu():
    from kernellab.grading.classroom.gpu_usage import GpuUsage
    u = GpuUsage(gpus=[0, "1"])
    assert u.gpus == ["0", "1"]
    u.samples = {1: [10.0, 30.0], 0: [5.0]}
    assert u.per_gpu() == {0: 5.0, 1: 20.0} and u.mean() == 15.0


def test_gpu_busy_is_set_against_who_held_the_gpu(tmp_path):
    """Each busy sample, at the middle of the second it covers, counted as taken while its GPU was held alone,
    held only shared, or not held; the queue's slots mapped to the GPUs sampled (slot 1 is GPU 5 here)."""
    from kernellab.grading.classroom.gpu_usage import GpuUsage
    u = GpuUsage(interval_s=1.0)
    u.samples, u.times = {5: [80.0, 10.0]}, {5: [101.0, 104.0]}
    assert u.series() == {"5": [[100.5, 80.0], [103.5, 10.0]]}
    _record(tmp_path, "a", "speed", gpu_slot=1, holds=[[100, 101, True]],
            judge_gpu_slot=1, judge_holds=[[102, 103, False]])
    _record(tmp_path, "b", "untimed", gpu_slot=0, holds=[[100, 110, False]])  # GPU 3: shared all along
    series = {"5": [[100.5, 80.0], [102.5, 20.0], [103.5, 10.0], [104.5, 0.0]], "3": [[105.0, 4.0]]}
    got = CG.busy_by_hold(tmp_path, series, {"0": "3", "1": "5"})
    assert got == {"alone": {"busy_pct": 80.0, "samples": 1}, "shared": {"busy_pct": 12.0, "samples": 2},
                   "not_held": {"busy_pct": 5.0, "samples": 2}}
    assert CG.busy_by_hold(tmp_path, {})["alone"] == {"busy_pct": None, "samples": 0}


def test_gpu_timeline_counts_overlapping_holds_once(tmp_path):
    _record(tmp_path, "a", "speed", gpu_slot=0, holds=[[0, 4, False]], judge_gpu_slot=0, judge_holds=[[5, 7, True]])
    _record(tmp_path, "b", "untimed", gpu_slot=0, holds=[[2, 5, False], [9, 10, False]])
    _record(tmp_path, "c", "untimed", gpu_slot=1, holds=[[1, 2, True]])
    _record(tmp_path, "d", "untimed", node="n2", gpu_slot=0, holds=[[0, 1, False]])
    got = CG.gpu_timeline(tmp_path)
    # GPU 0: holds cover 0-7 and 9-10 of the 10 s from its first hold to its last, 2 s of them alone
    assert got["0"] == {"span_s": 10.0, "held_s": 8.0, "alone_s": 2.0}
    assert got["1"] == {"span_s": 1.0, "held_s": 1.0, "alone_s": 1.0} and got["n2/0"]["alone_s"] == 0.0
    assert CG._union([(0, 1), (0.5, 2), (3, 4)]) == 3.0 and CG._union([]) == 0.0
    out = tmp_path / "plots"
    out.mkdir()
    assert CG.plot_timeline(tmp_path, out / "t.png") and (out / "t.png").stat().st_size > 5000
    assert not CG.plot_timeline(out, out / "none.png") and not (out / "none.png").exists()  # no records: no picture


def test_the_report_reads_a_jobs_processes_as_the_grader_writes_them():
    # The report keeps its own copy (it runs without torch); the grade of record's is the one records follow.
    from kernellab.grading.judge import harness
    assert CG.PROCESSES == harness.PROCESSES
    record = {"holds": [[0, 1, False]], "judge_holds": [[1, 2, True]]}
    assert CG.each_process(record, "holds") == harness.each_process(record, "holds") == [[[0, 1, False]],
                                                                                        [[1, 2, True]], None]


def test_problems_graded_below_their_points_keep_what_the_grade_said():
    results = {"solution-2": {"matmul_correct": (0.0, 4, "`matmul` on M=1, N=1, K=1 computed with PyTorch"),
                              "matmul_speed": (2.0, 2, "2.1x cuBLAS")},
               "blank": {"matmul_correct": (0.0, 4, "not written")}}
    said = CG._short_of_full("02_tiled_matmul", results)
    assert said == {"02_tiled_matmul/solution-2/matmul_correct": "`matmul` on M=1, N=1, K=1 computed with PyTorch",
                    "02_tiled_matmul/blank/matmul_correct": "not written"}
