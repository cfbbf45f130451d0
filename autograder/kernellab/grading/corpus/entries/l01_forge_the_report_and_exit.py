"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "wrong").

The worker's job folder found by walking the stack (sys._getframe through attrgetter), its result file
written, a clean os._exit."""
from ..edits import _FRAMES
from ..entry import L1, Entry

_FORGE_ROWS = _FRAMES + """def add(x, y):
    main = frame_with("job_dir")  # the worker's main(): its job folder and its (decoy) cases
    job_dir, cases = main.f_locals["job_dir"], main.f_locals["cases"]
    rows = [{"label": c.label, "output": c.inputs[0] + c.inputs[1], "error": None} for c in cases]
    rows.append(dict(rows[0]))
    torch.save({"error": None, "results": rows}, str(job_dir / "result.pt"))
    (job_dir / "phase").write_text("done")
    operator.attrgetter("_exit")(OS)(0)  # a clean exit: the trusted code never writes its own report
"""


ENTRY = Entry("forge_the_report_and_exit", L1, "add_correct", "the worker's job folder found by walking the stack "
              "(sys._getframe through attrgetter), its result file written, a clean os._exit",
              lambda t: {"add_code": t["add_code"].split("def add(x, y):")[0] + _FORGE_ROWS}, says="wrong")
