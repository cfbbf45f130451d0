"""Kernel-level profile of lesson 07's compiled training steps: the solution's block (custom ops) under torch.compile
against torch.compile(eager + SDPA), device time per step of each kernel over ten steps. GPU only.

    python3 autograder/benchmarks/step_profile.py      # prints the top kernels; OUT=DIR (default .) gets step_profile.json

assets/bench/lesson07_step_profile.md is one run on an H100."""
import json
import os
import sys

import torch
from torch.profiler import profile, ProfilerActivity
from kernellab.lessons import lesson07 as L
from kernellab.device import DEVICE
from kernellab.notebook_cells import load_solution

if not DEVICE.on_gpu:
    sys.exit("step_profile.py profiles training steps on a GPU; this machine has none")
sol = load_solution("07_ship_it", ("block_forward",))
fns = L.step_contenders(sol["block_forward"])
calls = L.step_calls({k: fns[k] for k in ("yours, compiled", "torch.compile(eager + SDPA)")}, L.GPU_SHAPE, graphs=False)
out = {}
for name, call in calls.items():
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            call()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t > 0:
            rows.append((e.key, e.count // 10, t / 10 / 1e3))
    rows.sort(key=lambda r: -r[2])
    total = sum(r[2] for r in rows)
    out[name] = {"total_ms": total, "rows": rows[:40]}
    print(f"== {name}: {total:.3f} ms of kernels per step")
    for k, c, ms in rows[:22]:
        print(f"  {ms*1e3:8.1f} us  x{c:<3d} {k[:110]}")
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "step_profile.json"), "w"), indent=1)
