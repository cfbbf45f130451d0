"""The course's GPU benchmark: solution kernels against their baselines, in one process.

``kernellab bench --out assets/bench`` writes lessonNN.md per lesson (a table, with the GPU's name,
versions and date), lessonNN.json (every number) and charts. Each comparison interleaves the
contenders round by round (A, B, A, B, ...) and reports the median of the round medians. Each lesson's
benchmark is its folder's ``bench.py`` (lessons/lNN_*/bench.py); this module only runs them in turn.
"""
from __future__ import annotations

import pathlib

from .device import DEVICE, fingerprint


def run_bench(out_dir: str, quick: bool = False, lessons=None) -> None:
    smoke = quick and lessons == ["07_ship_it"]  # lesson 07's bench has a CPU smoke test (--quick)
    if not DEVICE.on_gpu and not smoke:
        print("kernellab bench needs a CUDA GPU; this machine has none.")
        return
    from .sweeps import paying_launches
    with paying_launches():  # every lesson's rows carry do_bench and host time beside the course timer
        _run(out_dir, quick, lessons)


def _run(out_dir: str, quick: bool, lessons) -> None:
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(fingerprint())
    from .lessons import FOLDERS
    lessons = lessons or [lid for lid in FOLDERS if lid != "05_flash_attention_backward"]  # 04's bench times 05 too
    if "01_roofline_vector_add" in lessons:
        from .lessons.l01_roofline_vector_add.bench import _write_lesson01, bench_lesson01
        _write_lesson01(bench_lesson01(quick), out)
        print((out / "lesson01.md").read_text())
    if "02_tiled_matmul" in lessons:
        from .lessons.l02_tiled_matmul.bench import bench_lesson02, write_lesson02
        write_lesson02(bench_lesson02(quick), out)
        print((out / "lesson02.md").read_text())
    if "03_fused_softmax_layernorm" in lessons:
        from .lessons.l03_fused_softmax_layernorm.bench import bench_lesson03, write_lesson03
        write_lesson03(bench_lesson03(quick), out)
        print((out / "lesson03.md").read_text())
    if "04_flash_attention" in lessons or "05_flash_attention_backward" in lessons:
        from .lessons.l04_flash_attention.bench import bench_attention, write_attention
        write_attention(bench_attention(quick), out)
        print((out / "lesson04.md").read_text() + (out / "lesson05.md").read_text())
    if "06_profile_first" in lessons:
        from .lessons.l06_profile_first.bench import bench_lesson06, write_lesson06
        write_lesson06(bench_lesson06(quick), out)
        print((out / "lesson06.md").read_text())
    if "07_ship_it" in lessons:
        from .lessons.l07_ship_it.bench import bench_lesson07, write_lesson07
        write_lesson07(bench_lesson07(quick), out)
        print((out / "lesson07.md").read_text())
    if "08_hopper" in lessons:
        from .lessons.l08_hopper.bench import bench_lesson08, write_lesson08
        res08 = bench_lesson08(quick)
        write_lesson08(res08, out)
        if res08 is not None:
            print((out / "lesson08.md").read_text())
    if "09_serve_it" in lessons:
        from .lessons.l09_serve_it.bench import bench_lesson09, write_lesson09
        res09 = bench_lesson09(quick)
        write_lesson09(res09, out)
        if res09 is not None:
            print((out / "lesson09.md").read_text())
    if "10_mixture_of_experts" in lessons:
        from .lessons.l10_mixture_of_experts.bench import bench_lesson10, write_lesson10
        res10 = bench_lesson10(quick)
        write_lesson10(res10, out)
        if res10 is not None:
            print((out / "lesson10.md").read_text())
