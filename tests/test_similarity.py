"""The instructor's class report (grading/instructor/class_report.py) and its similarity table
(grading/instructor/similarity.py), on made-up submissions: copies that were renamed, re-commented, re-spaced or
had statements moved are found, kernels written independently for the same problem are not. Runtime: ~3 s
(matplotlib's plots; no grading)."""
import json

import nbformat
import pytest

from kernellab.grading.instructor import class_report, similarity

LESSON = "03_fused_softmax_layernorm"
STUB = ('@triton.jit\ndef softmax_kernel(out_ptr, in_ptr, stride_in, stride_out, n_cols, BLOCK: tl.constexpr):\n'
        '    raise NotImplementedError("write your code here")\n\n\ndef softmax(x):\n'
        '    raise NotImplementedError("write your code here")\n')
ORIGINAL = '''
@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride_in, stride_out, n_cols, BLOCK: tl.constexpr):
    # one program per row
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride_in + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    tl.store(out_ptr + row * stride_out + cols, (e / s).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=BLOCK, num_warps=4)
    return out
'''

# The same code with every name changed, other comments, other spacing and line breaks, a docstring.
RENAMED = '''
@triton.jit
def my_kernel(o, inp, s_in, s_out, N, BS: tl.constexpr):
    """Row-wise softmax (I wrote this myself)."""
    r = tl.program_id(0)
    offs = tl.arange(0, BS)
    ok = offs < N

    v = tl.load(inp + r * s_in + offs,
                mask=ok,
                other=-float("inf"))
    v = v.to(tl.float32)
    big = tl.max(v, axis=0)   # the row max
    ex = tl.exp(v - big)
    tot = tl.sum(ex, axis=0)
    tl.store(o + r * s_out + offs, (ex / tot).to(o.dtype.element_ty), mask=ok)


def softmax(t):
    rows, cols = t.shape
    res = torch.empty_like(t)
    bs = triton.next_power_of_2(cols)
    my_kernel[(rows,)](res, t, t.stride(0), res.stride(0), cols, BS=bs, num_warps=4)
    return res
'''

# A copy with two statements swapped and one added: still above the threshold.
EDITED = ORIGINAL.replace('''    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
''', '''    cols = tl.arange(0, BLOCK)
    row = row.to(tl.int64)
    mask = cols < n_cols
''').replace('''    out = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(n_cols)
''', '''    BLOCK = triton.next_power_of_2(n_cols)
    out = torch.empty_like(x)
''')

# Written independently for the same problem: pointers built first, the exponent in base 2, a helper for the grid.
INDEPENDENT = '''
@triton.jit
def row_softmax(X, Y, xs, ys, ncol, B: tl.constexpr):
    pid = tl.program_id(axis=0)
    x_row = X + pid.to(tl.int64) * xs
    y_row = Y + pid.to(tl.int64) * ys
    idx = tl.arange(0, B)
    vals = tl.load(x_row + idx, mask=idx < ncol, other=float("-inf")).to(tl.float32)
    shifted = vals - tl.max(vals, 0)
    num = tl.exp2(shifted * 1.4426950408889634)
    den = tl.sum(num, 0)
    tl.store(y_row + idx, num / den, mask=idx < ncol)


def softmax(x):
    assert x.ndim == 2 and x.is_contiguous()
    y = torch.empty_like(x)
    grid = (x.shape[0],)
    row_softmax[grid](x, y, x.stride(0), y.stride(0), x.shape[1], B=max(16, triton.next_power_of_2(x.shape[1])))
    return y
'''

# Another independent one: a loop over column blocks with an online max and sum (rows of any length).
ONLINE = '''
@triton.jit
def k_online(inp, out, stride, n, BLOCK_N: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    base = inp + r * stride
    m_run = -float("inf")
    d_run = 0.0
    for start in range(0, n, BLOCK_N):
        c = start + tl.arange(0, BLOCK_N)
        blk = tl.load(base + c, mask=c < n, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_run, tl.max(blk, 0))
        d_run = d_run * tl.exp(m_run - m_new) + tl.sum(tl.exp(blk - m_new), 0)
        m_run = m_new
    for start in range(0, n, BLOCK_N):
        c = start + tl.arange(0, BLOCK_N)
        blk = tl.load(base + c, mask=c < n, other=-float("inf")).to(tl.float32)
        tl.store(out + r * stride + c, tl.exp(blk - m_run) / d_run, mask=c < n)


def softmax(x):
    out = torch.empty_like(x)
    k_online[(x.shape[0],)](x, out, x.stride(0), x.shape[1], BLOCK_N=1024)
    return out
'''


def _nb(source: str, solution_markers: bool = False):
    if solution_markers:
        source = "### BEGIN SOLUTION\n" + source.strip("\n") + "\n### END SOLUTION\n"
    cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
        "grade": False, "solution": True, "locked": False, "grade_id": "softmax_code", "schema_version": 3}})
    return nbformat.v4.new_notebook(cells=[cell])


def test_copies_score_above_the_threshold_and_independent_kernels_below():
    sh = {name: similarity.own_shingles(src, similarity.shingles(STUB))
          for name, src in [("original", ORIGINAL), ("renamed", RENAMED), ("edited", EDITED),
                            ("independent", INDEPENDENT), ("online", ONLINE)]}
    for copy in ("renamed", "edited"):
        assert similarity.jaccard(sh["original"], sh[copy]) >= 0.9 > similarity.THRESHOLD, copy
    for a, b in [("original", "independent"), ("original", "online"), ("independent", "online"),
                 ("renamed", "independent")]:
        assert similarity.jaccard(sh[a], sh[b]) <= 0.4 < similarity.THRESHOLD, (a, b)
    # comments, docstrings, names and layout are not what is compared
    assert similarity.tokens(ORIGINAL) == similarity.tokens(RENAMED)


def test_compare_lists_pairs_within_the_class_and_with_the_course_solution():
    subs = {"ann": _nb(RENAMED), "bob": _nb(INDEPENDENT), "cy": _nb(ONLINE), "dee": _nb(EDITED), "eve": _nb(STUB)}
    rows = similarity.compare(subs, _nb(STUB), _nb(ORIGINAL, solution_markers=True))
    pairs = {(r["a"], r["b"]) for r in rows}
    assert pairs == {("SOLUTION", "ann"), ("SOLUTION", "dee"), ("ann", "dee")}, rows
    assert all(r["cell"] == "softmax_code" and r["similarity"] >= similarity.THRESHOLD for r in rows)
    # the stub left as it is has nothing of its own to compare, and so matches no one
    assert not any("eve" in p for p in pairs)


def _record(student, problem, score, top, why, value=None, gpu="NVIDIA H100 80GB HBM3", flagged=False):
    details = {"value": value} if value is not None else {}
    if flagged:
        details["flagged"] = True
    return {"student": student, "lesson": LESSON, "problem": problem, "kind": "speed" if value else "correctness",
            "score": score, "max_points": top, "why": why, "details": details,
            "environment": {"device": {"name": gpu}}}


def test_class_report_page(tmp_path):
    course = tmp_path / "autograder"
    for student, src in {"ann": RENAMED, "bob": INDEPENDENT, "cy": ONLINE}.items():
        path = course / "submitted" / student / LESSON / f"{LESSON}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(_nb(src), path)
    for folder, nb in (("notebooks", _nb(STUB)), ("solutions", _nb(ORIGINAL, solution_markers=True))):
        (tmp_path / folder / LESSON).mkdir(parents=True)
        nbformat.write(nb, tmp_path / folder / LESSON / f"{LESSON}.ipynb")
    recs = [
        _record("ann", "softmax_correct", 4, 4, "Correct on all 9 cases."),
        _record("bob", "softmax_correct", 0, 4, "Wrong result for 1 x 7. Elements from index 3 on are wrong."),
        _record("cy", "softmax_correct", 0, 4, "Wrong result for 64 x 4097. Elements from index 12 on are wrong."),
        _record("ann", "softmax_speed", 2, 2, "1.31x torch.softmax.", value=1.31),
        _record("bob", "softmax_speed", 1, 2, "0.92x torch.softmax.", value=0.92, gpu="NVIDIA A100-SXM4-80GB"),
        _record("cy", "softmax_speed", 0, 2, "Faster than the roofline allows.", value=9.5, flagged=True),
    ]
    for r in recs:
        d = course / "grading_logs" / r["student"] / LESSON / r["problem"]
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(r))
    out = tmp_path / "reports" / f"{LESSON}.html"
    res = class_report.report(course, LESSON, out)
    assert res["per"]["softmax_correct"]["n"] == 3 and res["per"]["softmax_correct"]["full"] == 1
    assert res["per"]["softmax_speed"]["ratios"] == {"NVIDIA H100 80GB HBM3": [1.31],  # cy's 9.5x was rejected
                                                     "NVIDIA A100-SXM4-80GB": [0.92]}
    assert res["totals"] == {"ann": [6.0, 6.0], "bob": [1.0, 6.0], "cy": [0.0, 6.0]}
    # the same reason, with other numbers, is one reason said twice
    assert res["reasons"]["Wrong result for # x #."] == 2
    assert [(f["student"], f["problem"]) for f in res["flagged"]] == [("cy", "softmax_speed")]
    assert [(r["a"], r["b"]) for r in res["similar"]] == [("SOLUTION", "ann")]
    page = out.read_text()
    for section in ("Pass rate per problem", "Score distribution", "Speed ratio per GPU model",
                    "Most common reasons for lost points", "Flagged", "Similar kernels"):
        assert section in page, section
    assert page.count("<img") == 3 and "the course&#x27;s solution" in page


def test_reason_masks_numbers_and_quoted_values():
    assert class_report.reason("Wrong result for M=37, N=53. More.") == "Wrong result for M=#, N=#."
    assert class_report.reason("`x` raised ValueError: 'abc'") == class_report.reason("`y` raised ValueError: 'de'")
