"""The arithmetic behind lesson 01's roofline explorer: which ceiling binds, and the best FLOP/s."""
from kernellab.ceilings import EXAMPLE, Ceilings
from kernellab.widgets import ROOFLINE_OPS


def test_each_side_of_the_ridge_names_its_ceiling():
    c = Ceilings(3000.0, 900.0, True, "test")  # 3 TB/s, 900 TFLOP/s: ridge at 300 FLOP/B
    assert (c.attainable(1 / 6), c.bound(1 / 6)) == (0.5e12, "memory")
    assert (c.attainable(1000.0), c.bound(1000.0)) == (900e12, "compute")
    assert c.bound(299.0) == "memory" and c.attainable(299.0) == 299.0 * 3e12


def test_the_course_kernels_fall_where_the_lessons_say_on_a_t4():
    bounds = {name: EXAMPLE.bound(i) for name, i in ROOFLINE_OPS.items()}  # ridge ~203 FLOP/B
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
