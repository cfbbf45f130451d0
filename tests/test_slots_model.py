"""autograder/benchmarks/slots_model.py: the slot rule's model, on jobs whose answers are known by hand."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "autograder" / "benchmarks"))
import slots_model as M  # noqa: E402


def job(*procs, outside=0.0):
    return {"timed": any(h == "alone" for p in procs for h, _ in p), "outside": outside, "procs": list(procs)}


def test_shared_holds_overlap_and_alone_ones_take_turns():
    two_shared = [job([("shared", 1.0)]), job([("shared", 1.0)])]
    assert M.simulate(two_shared, slots=2) == pytest.approx(1.0, abs=0.03)
    assert M.simulate(two_shared, slots=1) == pytest.approx(2.0, abs=0.03)
    # both ask at 0.5 s; the second has the GPU alone once the first is done
    two_timed = [job([("shared", 0.5), ("alone", 1.0)]), job([("shared", 0.5), ("alone", 1.0)])]
    assert M.simulate(two_timed, slots=2) == pytest.approx(2.5, abs=0.05)


def test_a_waiting_timed_hold_keeps_new_shared_ones_from_starting():
    long = job([("shared", 2.0)])
    timer = job([("shared", 0.2), ("alone", 1.0)])  # asks at 0.2 s, waits for the long one (2.0 s)
    late = job([("shared", 1.0)], outside=0.5)  # asks at 0.5 s: waits until the timer is done (3.0 s)
    assert M.simulate([long, timer, late], slots=3) == pytest.approx(4.0, abs=0.05)
    # handed back with no gap: shared again at once, and the next shared hold starts beside it
    back = job([("shared", 0.1), ("alone", 0.5), ("shared", 1.0)])
    assert M.simulate([back, job([("shared", 0.5)], outside=0.3)], slots=2) == pytest.approx(1.6, abs=0.05)


def test_a_jobs_later_process_may_pass_a_waiting_timer_where_modelled():
    # The rule not built, modelled (later_jump): a job's judge starts beside a waiting timed hold; its worker may not.
    long = job([("shared", 2.0)])
    timer = job([("shared", 0.2), ("alone", 1.0)])  # waits from 0.2 s for the long one (until 2.0 s)
    judged = job([("shared", 0.3)], [("shared", 0.5)])  # its judge asks at 0.3 s, while the timer waits
    assert M.simulate([long, timer, judged], slots=3) == pytest.approx(3.5, abs=0.05)  # judge after the timer
    assert M.simulate([long, timer, judged], slots=3, later_jump=True) == pytest.approx(3.0, abs=0.05)
    late = job([("shared", 1.0)], outside=0.5)  # a first process still waits for the timer
    assert M.simulate([long, timer, late], slots=3, later_jump=True) == pytest.approx(4.0, abs=0.05)


def test_pausing_lets_shared_holds_run_beside_a_timed_one_at_the_paused_rate():
    long = job([("shared", 2.0)])
    timer = job([("shared", 0.2), ("alone", 1.0)])  # asks at 0.2 s: drained, it waits for the long one
    assert M.simulate([long, timer], slots=2) == pytest.approx(3.0, abs=0.05)
    # paused instead: the timer goes at 0.2 s; the long hold has 1.8 s left, of which the pause (0.2-1.2 s)
    # does 1.0 s of work at full speed, none when stopped, 0.5 s at half speed
    assert M.simulate([long, timer], slots=2, paused_rate=1.0) == pytest.approx(2.0, abs=0.05)
    assert M.simulate([long, timer], slots=2, paused_rate=0.0) == pytest.approx(3.0, abs=0.05)
    assert M.simulate([long, timer], slots=2, paused_rate=0.5) == pytest.approx(2.5, abs=0.05)
    # two timers still take turns when paused
    two_timed = [job([("shared", 0.5), ("alone", 1.0)]), job([("shared", 0.5), ("alone", 1.0)])]
    assert M.simulate(two_timed, slots=2, paused_rate=0.5) == pytest.approx(2.5, abs=0.05)


def test_records_become_spans_and_jobs(tmp_path):
    phases = [["start", 0.0], ["alone", 1.0], ["alone-go", 3.0], ["run", 3.5], ["shared", 4.0],
              ["shared-go", 4.05], ["end", 5.0]]
    assert M.process_spans(phases[:-1], 5.0) == [("shared", 1.0), ("alone", 1.0), ("shared", pytest.approx(0.95))]
    assert M.process_spans([["start", 0.0], ["compile", 1.0]], 2.0) == [("shared", 2.0)]
    rec = tmp_path / "s1" / "02_tiled_matmul" / "matmul_speed"
    rec.mkdir(parents=True)
    rec.joinpath("result.json").write_text(json.dumps({
        "job_span": [100.0, 108.0], "phases": phases, "wall_s": 5.0, "slot_wait_s": 0.5,
        "judge_phases": [["start", 0.0], ["run", 1.0], ["end", 1.5]], "judge_wall_s": 1.5}))
    (only,) = M.jobs_from_records(tmp_path)
    assert only["timed"] and len(only["procs"]) == 2 and only["outside"] == pytest.approx(1.0)
    assert set(M.orders([only])) >= {"untimed, then timed (the queue's)", "timed first"}
