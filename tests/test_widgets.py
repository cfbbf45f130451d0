"""The arithmetic behind lesson 01's roofline explorer: which ceiling binds, and the best FLOP/s."""
from kernellab.ceilings import EXAMPLE
from kernellab.widgets import ROOFLINE_OPS, roofline_bound


def test_each_side_of_the_ridge_names_its_ceiling():
    bw, peak = 3e12, 900e12  # ridge at 300 FLOP/B
    assert roofline_bound(1 / 6, bw, peak) == (0.5e12, "memory")
    assert roofline_bound(1000.0, bw, peak) == (peak, "compute")
    attainable, bound = roofline_bound(299.0, bw, peak)
    assert bound == "memory" and attainable == 299.0 * bw


def test_the_course_kernels_fall_where_the_lessons_say_on_a_t4():
    bw, peak = EXAMPLE.copy_gbps * 1e9, EXAMPLE.fp16_tflops * 1e12  # ridge ~203 FLOP/B
    bounds = {name: roofline_bound(i, bw, peak)[1] for name, i in ROOFLINE_OPS.items()}
    assert bounds["vector add, fp16 (1 FLOP / 6 B)"] == "memory"
    assert bounds["softmax fused, fp16 (~5 FLOPs / 4 B)"] == "memory"
    assert bounds["matmul 1024^3, fp16"] == "compute" and bounds["matmul 4096^3, fp16"] == "compute"


def test_the_explorer_follows_the_kernel_picked():
    import matplotlib
    matplotlib.use("Agg")
    from kernellab.widgets import roofline_explorer
    box = roofline_explorer()
    pick, slider = box.children[0].children
    pick.value = "matmul 4096^3, fp16"
    assert abs(slider.value / ROOFLINE_OPS["matmul 4096^3, fp16"] - 1) < 1e-6
