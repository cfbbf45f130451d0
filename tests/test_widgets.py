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
    import math
    for name, intensity in ROOFLINE_OPS.items():
        pick.value = name
        # on the slider's own grid, within 1.2 % of the kernel's intensity: the browser has nothing to snap (a
        # snap sends the value back and draws the picture twice)
        steps = math.log10(slider.value) / slider.step
        assert abs(steps - round(steps)) < 1e-6 and abs(slider.value / intensity - 1) < 0.012, name


def test_a_picture_that_cannot_be_drawn_says_why_and_keeps_the_last_one(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernellab import widgets_base
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("KERNELLAB_STATIC_WIDGETS", raising=False)

    def render(n=1):
        if n > 2:
            raise ValueError(f"no picture for n={n}")
        plt.subplots()[1].plot(range(n + 1))

    open_before = plt.get_fignums()  # other tests in this process may have left figures open
    box = widgets_base._interactive(render, lambda w: ({"n": (s := w.IntSlider(1, 0, 5))}, [[s]]))
    slider, picture, note = box.children[0].children[0], box.children[1], box.children[2]
    first = bytes(picture.value)  # the widget keeps a memoryview
    slider.value = 2
    second = bytes(picture.value)
    assert second.startswith(b"\x89PNG") and second != first and note.value == ""
    slider.value = 4
    assert bytes(picture.value) == second and "ValueError: no picture for n=4" in note.value
    slider.value = 0
    assert note.value == "" and bytes(picture.value) not in (first, second)
    assert plt.get_fignums() == open_before  # every figure drawn for the widget was closed
