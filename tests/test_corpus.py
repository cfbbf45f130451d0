"""The cheat corpus (CPU part): every cheat scores 0 on what it attacks, with the defence named, and leaves
the lesson's other problems graded as the solution's. The GPU part (timing, streams, illegal memory access)
runs with ``kernellab corpus`` on a GPU; its report is committed under assets/gpu/."""
import os

import pytest

from kernellab.grading import corpus as C
from kernellab.grading.processes import sandbox


def test_the_corpus_covers_enough_threats_and_lessons():
    assert len(C.CHEATS) >= 72 and len(C.CONTROLS) >= 23
    assert len({e.lesson for e in C.CHEATS}) >= 5
    assert {e.name for e in C.CHEATS if e.gpu} >= {"side_stream", "illegal_memory_access"}


def test_each_machine_tries_the_entries_it_can(monkeypatch):
    import types
    numpy_views = next(e for e in C.CHEATS if e.name == "function_in_numpy")
    side_stream = next(e for e in C.CHEATS if e.name == "side_stream")
    assert C.runs_here(numpy_views) and not C.runs_here(side_stream)
    from kernellab.grading.corpus import entry
    monkeypatch.setattr(entry, "DEVICE", types.SimpleNamespace(on_gpu=True))
    assert C.runs_here(side_stream) and not C.runs_here(numpy_views)  # no numpy view of GPU memory exists


@pytest.fixture(scope="module")
def cheats(tmp_path_factory):
    # two at a time where the machine has the cores (CI's two): on a CPU nothing is timed
    todo = [e for e in C.CHEATS if not e.gpu]
    res = C.run(todo, progress=False, jobs=min(2, os.cpu_count() or 1))
    assert [r["name"] for r in res] == [e.name for e in todo]  # in the entries' order, however many at once
    print(C.write(res, tmp_path_factory.mktemp("corpus")))
    return {r["name"]: r for r in res}


@pytest.mark.parametrize("entry", [e for e in C.CHEATS if not e.gpu], ids=lambda e: e.name)
def test_cheat_gains_nothing(cheats, entry):
    if entry.confined and sandbox.abi() < 1:
        pytest.skip(f"{entry.name} is defeated by the worker's Landlock confinement, which this kernel lacks: "
                    "here it gains its points (docs/GRADE_OF_RECORD.md, residual risk 1)")
    r = cheats[entry.name]
    assert r["score"] == 0, (entry.name, r["why"])
    assert r["ok"], (entry.name, r["wanted"], r["why"])


def test_cheats_leave_other_problems_graded_as_the_solution(cheats):
    # Only the problems that load the changed cell see it: most of each lesson stays the solution's.
    for r in cheats.values():
        assert r["untouched"], r["name"]
        assert r["problem"] not in r["untouched"]


def test_every_class_that_beat_the_workers_claim_has_two_cheats():
    # Issue 23 item 6: each class of cheat that forged points before the judge replayed the record.
    classes = {
        "op watch off": {"watch_off_private_module_alias", "watch_off_attrgetter_path", "watch_off_dispatch_guard"},
        "host arithmetic": {"numpy_views_add", "numpy_views_online_softmax", "python_floats_fill_",
                            "python_floats_fill_layernorm", "python_helper_in_the_kernel",
                            "python_helper_in_the_softmax_kernel", "heuristics_hook_computes", "grid_lambda_computes",
                            "clone_does_the_work"},
        "forged report": {"forge_the_report_and_exit", "forge_an_empty_report", "replace_results_through_frames",
                          "subprocess_does_the_work"},
        "counters": {"three_reads_on_a_clone", "atomic_add_zero_as_loads", "scores_made_before_the_call",
                     "scores_in_the_outputs_allocation", "backward_scratch_made_before_the_call"},
    }
    names = {e.name for e in C.CHEATS if not e.gpu}
    for what, members in classes.items():
        assert members <= names, (what, members - names)
        assert len(members) >= 2
