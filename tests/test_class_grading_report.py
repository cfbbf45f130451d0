"""scripts/class_grading.py's bookkeeping, on made-up records: which grading processes held a GPU while another
timed on it (the GPU run's proof that timing was never shared), and the speed-under-load table."""
import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("class_grading", ROOT / "scripts" / "class_grading.py")
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


def test_process_seconds_and_what_stands_behind_each_ratio(tmp_path):
    state = {"before": {"sm_mhz": 1980.0, "reasons": "0x0"}, "after": {"sm_mhz": 1755.0, "reasons": "0x4"}}
    _record(tmp_path, "a", "add_bandwidth", kind="speed", wall_s=3.0,
            slot_wait_s=1.0, holds=[[0, 1, False], [1, 2, True]], judge_wall_s=2.0, judge_slot_wait_s=0.5,
            details={"value": 1.0, "cand_ms_median": 0.25, "base_ms_median": 0.26}, gpu_state=state)
    _record(tmp_path, "b", "add_correct", kind="correctness", wall_s=4.0,
            holds=[[0, 4, False]], details={"value": None})
    assert CG.process_seconds(tmp_path) == {"workers_alone": 1, "worker_s": 7.0, "slot_wait_s": 1.5, "judge_s": 2.0}
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
