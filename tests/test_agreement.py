"""Learner-side integrity: the notebook's checks and the grade of record agree on the solution (here on the
CPU, lesson 01; on a GPU for every lesson: assets/gpu/agreement_h200.md), and the comparison can fail."""
from kernellab.grading.instructor.agreement import compare, write

LESSON = "01_roofline_vector_add"


def _record(fractions: dict) -> dict:
    from kernellab.lessons import problems_of
    ps = problems_of(LESSON)
    return {pid: {"scores": [f * ps[pid].points], "values": [], "messages": ["why"]} for pid, f in fractions.items()}


def test_compare_finds_a_disagreement_and_a_check_that_never_ran():
    verdicts = {"answers_add": {"fraction": 1.0, "value": None, "not_here": None},
                "add_correct": {"fraction": 0.6, "value": None, "not_here": None},
                "add_bandwidth": {"fraction": 0.0, "value": None, "not_here": "speed is measured only on a GPU"}}
    record = _record({"answers_add": 1.0, "add_correct": 1.0, "add_bandwidth": 0.0, "answers_matmul": 1.0})
    rows = {r["problem"]: r for r in compare(LESSON, verdicts, record)}
    assert rows["answers_add"]["state"] == "agree"
    assert rows["add_correct"]["state"] == "disagree"
    assert rows["answers_matmul"]["state"] == "disagree" and "never ran" in rows["answers_matmul"]["why"]
    assert rows["add_bandwidth"]["state"] == "not judged by the check here"
    assert rows["fused_correct"]["state"] == "disagree"  # graded by neither side


def test_lesson01_solution_checks_agree_with_the_grade_of_record(tmp_path, monkeypatch):
    from kernellab.grading.instructor.agreement import agree
    from test_notebooks import _kernel_env
    for k, v in _kernel_env().items():
        monkeypatch.setenv(k, v)
    res = agree([LESSON], jobs=2, out=tmp_path)
    states = {r["problem"]: r["state"] for r in res["rows"]}
    assert states == {"answers_add": "agree", "answers_matmul": "agree", "add_correct": "agree",
                      "fused_correct": "agree", "add_bandwidth": "not judged by the check here",
                      "fused_speed": "not judged by the check here"}
    assert "4 agree, 2 not judged by the check here" in (tmp_path / "agreement.md").read_text()
    assert write(res, tmp_path)


def test_runs_on_one_gpu_model_merge_into_one_report(tmp_path):
    import json

    from kernellab.grading.instructor.agreement import merge
    header = ["- GPU: **X**", "- torch", "- date: 2026-01-01 00:00 UTC", "- fingerprint"]
    row = {"lesson": LESSON, "problem": "add_correct", "points": 4, "learner": 1.0, "record": 1.0,
           "learner_value": None, "record_value": None, "state": "agree", "why": "ok"}
    a = {"rows": [row], "notebooks": {LESSON: {"wall_s": 1.0, "errors": []}}, "header": header}
    b = {"rows": [dict(row, lesson="02_tiled_matmul", problem="matmul_correct")],
         "notebooks": {"02_tiled_matmul": {"wall_s": 2.0, "errors": []}},
         "header": header[:2] + ["- date: 2026-01-01 01:00 UTC"] + header[3:]}
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    text = merge([tmp_path / "a.json", tmp_path / "b.json"], tmp_path / "out")
    assert "Summary: 2 agree." in text and "02_tiled_matmul in a later run: date: 2026-01-01 01:00 UTC" in text
