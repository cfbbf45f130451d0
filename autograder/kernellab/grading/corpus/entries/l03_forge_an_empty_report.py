"""cheat: lesson 03, attacks `softmax_correct`; expected: 0 points (the message says "no results").

A result file with no rows and a clean exit."""
from ..edits import _FRAMES
from ..entry import L3, Entry

_FORGE_NO_ROWS = _FRAMES + """def softmax(x):
    job_dir = frame_with("job_dir").f_locals["job_dir"]
    torch.save({"error": None, "results": []}, str(job_dir / "result.pt"))  # no rows: nothing to replay
    (job_dir / "phase").write_text("done")
    operator.attrgetter("_exit")(OS)(0)
"""


ENTRY = Entry("forge_an_empty_report", L3, "softmax_correct", "a result file with no rows and a clean exit",
              lambda t: {"softmax_code": t["softmax_code"].split("def softmax(x):")[0] + _FORGE_NO_ROWS},
              says="no results")
