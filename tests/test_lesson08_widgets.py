"""Lesson 08's timeline simulator: serial, software-pipelined and warp-specialised schedules of one program's
tiles obey the rules the lesson states (one buffer per stage, one copy engine, shared tensor cores)."""
import itertools

import pytest

from kernellab.lessons.l08_hopper.widgets import MODES, busy_fraction, makespan, pipeline_schedule

PARAMS = [  # n_tiles, stages, load, mma, softmax
    (8, 3, 1.0, 1.0, 0.6), (8, 2, 2.0, 1.0, 0.0), (5, 4, 0.3, 1.0, 1.2), (1, 1, 1.0, 1.0, 0.5),
    (12, 6, 1.7, 0.8, 0.9), (7, 1, 0.5, 1.0, 0.5), (9, 2, 1.0, 0.5, 0.5),
]
ALL = [(p, mode) for p in PARAMS for mode in MODES]


def of(events, what):
    return {e["tile"]: e for e in events if e["what"] == what}


def compute_end(events):
    """When each tile's compute (mma, then softmax if any) finished: its buffer is free from then on."""
    done = {}
    for e in events:
        if e["what"] in ("mma", "softmax"):
            done[e["tile"]] = max(done.get(e["tile"], 0.0), e["end"])
    return done


@pytest.mark.parametrize("n,stages,load,mma,softmax", PARAMS)
def test_serial_is_the_sum_of_every_step(n, stages, load, mma, softmax):
    events = pipeline_schedule(n, stages, load, mma, softmax, mode="serial")
    assert makespan(events) == pytest.approx(n * (load + mma + softmax))
    assert {e["lane"] for e in events} == {"warps"} and not [e for e in events if e["what"] == "wait"]


@pytest.mark.parametrize("stages", [2, 3, 5])
@pytest.mark.parametrize("load,mma,softmax", [(1.6, 1.0, 0.6), (1.0, 0.5, 0.0), (0.5, 1.0, 0.5), (2.0, 0.7, 0.3)])
def test_pipelined_hides_the_shorter_of_load_and_compute(stages, load, mma, softmax):
    n = 10  # the longer of the two runs back to back; the shorter costs once, at the start or the end
    events = pipeline_schedule(n, stages, load, mma, softmax, mode="pipelined")
    compute = mma + softmax
    assert makespan(events) == pytest.approx(n * max(load, compute) + min(load, compute))


def test_balanced_pipeline_costs_one_extra_tile():
    events = pipeline_schedule(8, 2, 1.6, 1.0, 0.6, mode="pipelined")
    assert makespan(events) == pytest.approx(9 * 1.6)


@pytest.mark.parametrize("params,mode", ALL)
def test_every_tile_once_and_the_tensor_cores_never_double_booked(params, mode):
    n = params[0]
    events = pipeline_schedule(*params, mode=mode)
    assert [e["start"] for e in events] == sorted(e["start"] for e in events)
    for what in ("load", "mma"):
        assert sorted(e["tile"] for e in events if e["what"] == what) == list(range(n))
    mmas = sorted((e for e in events if e["what"] == "mma"), key=lambda e: e["start"])
    assert all(a["end"] <= b["start"] + 1e-9 for a, b in zip(mmas, mmas[1:]))
    for lane in {e["lane"] for e in events}:  # a lane does one thing at a time, waits included
        mine = sorted((e for e in events if e["lane"] == lane), key=lambda e: e["start"])
        assert all(a["end"] <= b["start"] + 1e-9 for a, b in zip(mine, mine[1:]))


@pytest.mark.parametrize("params,mode", ALL)
def test_the_order_of_steps_and_the_buffer_rule(params, mode):
    n, stages = params[0], params[1]
    events = pipeline_schedule(*params, mode=mode)
    loads, mmas, done = of(events, "load"), of(events, "mma"), compute_end(events)
    for i in range(n):
        assert mmas[i]["start"] >= loads[i]["end"] - 1e-9  # no mma before its tile arrived
        if i:
            assert loads[i]["start"] >= loads[i - 1]["end"] - 1e-9  # one copy engine, in order
        if i >= stages:
            assert loads[i]["start"] >= done[i - stages] - 1e-9  # the buffer is tile i-stages's until it is done
        if mode == "specialised":
            assert mmas[i]["lane"] == f"consumer {i % 2}"
            if i >= 2:
                assert mmas[i]["start"] >= done[i - 2] - 1e-9  # a consumer finishes its tile first
        elif i:
            assert mmas[i]["start"] >= done[i - 1] - 1e-9


@pytest.mark.parametrize("params", PARAMS + [(10, s, ld, 1.0, sm) for s, ld, sm in
                                             itertools.product((1, 2, 4), (0.4, 1.0, 2.5), (0.0, 0.5, 1.5))])
def test_each_mode_is_at_least_as_fast_as_the_one_before(params):
    spans = [makespan(pipeline_schedule(*params, mode=mode)) for mode in MODES]
    assert spans[2] <= spans[1] + 1e-9 <= spans[0] + 2e-9


def test_ping_pong_overlaps_softmax_with_the_other_consumers_mma():
    pipelined = pipeline_schedule(10, 4, 0.3, 1.0, 1.0, mode="pipelined")
    special = pipeline_schedule(10, 4, 0.3, 1.0, 1.0, mode="specialised")
    assert busy_fraction(pipelined) == pytest.approx(10 / (0.3 + 20))
    assert busy_fraction(special) == pytest.approx(10 / 11.3) and makespan(special) < 0.6 * makespan(pipelined)
    softmax = [e for e in special if e["what"] == "softmax"]
    mmas = [e for e in special if e["what"] == "mma"]
    assert any(s["start"] < m["end"] and m["start"] < s["end"] and s["lane"] != m["lane"]
               for s in softmax for m in mmas)


def test_one_stage_leaves_nothing_to_overlap():
    spans = {mode: makespan(pipeline_schedule(6, 1, 1.0, 1.0, 0.5, mode=mode)) for mode in MODES}
    assert spans["pipelined"] == pytest.approx(spans["serial"]) == pytest.approx(6 * 2.5)


@pytest.mark.parametrize("kwargs,words", [
    (dict(n_tiles=0), "n_tiles"), (dict(n_tiles=2.5), "n_tiles"), (dict(stages=0), "stages"),
    (dict(load=0.0), "load"), (dict(mma=-1.0), "mma"), (dict(softmax=-0.1), "softmax"),
    (dict(mode="async"), "mode must be one of serial, pipelined, specialised"),
])
def test_bad_arguments_say_what_is_wrong(kwargs, words):
    args = dict(n_tiles=4, stages=2, load=1.0, mma=1.0, softmax=0.5, mode="specialised") | kwargs
    with pytest.raises(ValueError, match=words):
        pipeline_schedule(**args)


def test_the_timeline_widget_draws_and_redraws():
    import matplotlib
    matplotlib.use("Agg")
    from kernellab.lessons.l08_hopper.widgets import warp_timeline
    ui = warp_timeline()
    stages, tiles = ui.children[0].children
    load, softmax = ui.children[1].children
    stages.value, tiles.value, load.value, softmax.value = 1, 3, 2.0, 0.0  # each move redraws without error
    stages.value = 6
    assert (stages.value, tiles.value) == (6, 3)


def test_headless_runs_draw_one_static_timeline(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from kernellab.lessons.l08_hopper.widgets import warp_timeline
    monkeypatch.setenv("KERNELLAB_STATIC_WIDGETS", "1")
    shown = []
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.append(plt.gcf()))
    assert warp_timeline(n_tiles=4, stages=2) is None
    titles = [ax.get_title() for ax in shown[0].axes]
    assert len(shown) == 1 and titles[0].startswith("serial: makespan 10.4")
    assert all("tensor cores busy" in t for t in titles)
    plt.close("all")
