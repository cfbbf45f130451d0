"""Lesson 07's training steps (the solution's block and the baselines) by the course timer with the GPU-side wait
that hid ~0.5-1 ms of host time and with the graded step problems' STEP_HOST_MS, three repetitions each, beside
do_bench and the host's time to issue a step; and how long gpu_wait(ms=STEP_HOST_MS) really waits. GPU only.

    python3 scripts/step_timer_check.py        # prints a table; OUT=DIR (default .) gets step_timer_check.json

assets/bench/lesson07_step_timer.md is one run on an H100."""
import json
import os
import sys
import time

import torch

from kernellab import timing
from kernellab.device import DEVICE
from kernellab.lessons import lesson07 as L
from kernellab.notebook_cells import load_solution


def waited_ms(ms: float) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    timing.gpu_wait(ms=ms)
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def main() -> None:
    if not DEVICE.on_gpu:
        sys.exit("step_timer_check.py times training steps on a GPU; this machine has none")
    out = {"device": DEVICE.name, "torch": torch.__version__, "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    waits = [waited_ms(timing.STEP_HOST_MS) for _ in range(5)]  # the first also calibrates
    out["cycles_per_ms"], out["wait_10ms_measured"] = timing._CALIBRATION["cycles_per_ms"], waits
    sol = load_solution("07_ship_it", ("block_forward",))
    calls = L.step_calls(L.step_contenders(sol["block_forward"]), L.GPU_SHAPE, graphs=True)
    runs = {"old_wait": [], "host_hidden": []}
    for _ in range(3):  # alternating, so that a drift of the machine shows in both
        runs["old_wait"].append(timing.interleaved(calls, 3))
        runs["host_hidden"].append(timing.interleaved(calls, 3, timing.STEP_HOST_MS))
    out["runs"] = {k: [{n: v[n] for n in calls} for v in r] for k, r in runs.items()}
    out["do_bench_ms"] = timing.do_bench_ms(calls)
    out["host_ms"] = {n: r["host_ms"] for n, r in timing.host_enqueue_ms(calls).items()}
    for k, r in out["runs"].items():
        print(k)
        for n in calls:
            print(f"  {n:45s} " + " ".join(f"{v[n]:.3f}" for v in r))
        print("   ratio eager+SDPA / yours:", [round(v["eager + SDPA"] / v["yours, compiled"], 3) for v in r],
              " compile / yours:", [round(v["torch.compile(eager + SDPA)"] / v["yours, compiled"], 3) for v in r])
    print("do_bench", json.dumps({k: round(v, 3) for k, v in out["do_bench_ms"].items()}))
    print("host", json.dumps({k: round(v, 3) for k, v in out["host_ms"].items()}))
    print("wait", out["cycles_per_ms"], [round(w, 3) for w in waits])
    with open(os.path.join(os.environ.get("OUT", "."), "step_timer_check.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
