"""Which learners' kernels look copied: from each other within the class, or from the course's own solutions.

Each solution cell a learner filled in (nbgrader's ``solution`` cells, one per graded function) is normalised so
that the changes a copier makes cheaply do not count:

- comments, blank lines, line breaks inside brackets and indentation width are gone (Python's tokenizer);
- every string is one token ``S``, and a string standing alone (a docstring) is dropped;
- every identifier the learner chose becomes one and the same token ``v``, so renaming variables, arguments and
  the kernel itself changes nothing, even a rename that is not one-to-one (``BLOCK=BLOCK`` written
  ``BS=bs``); keywords, builtins, the modules a kernel uses
  (``tl``, ``triton``, ``torch``, ...) and attribute names (``.load``, ``.program_id``) are kept, because they are
  what the code does.

Two cells are compared by the Jaccard index of their token 5-grams (shared / all distinct), after removing the
5-grams the release cell already held (the signature and comments the course gave everyone: every learner has
them). A pair at or above ``THRESHOLD`` on a cell is listed. A cell with fewer than ``MIN_SHINGLES`` 5-grams of
its own is not compared: a one-line body is the same for every correct learner.

High similarity is a reason to look, not proof: two learners following the lesson's hints closely can write
near-identical short kernels. tests/test_similarity.py checks the threshold on made-up submissions: copies
that were renamed, re-commented, re-spaced or had a statement moved score above it, and independently written
kernels for the same problem below it.
"""
from __future__ import annotations

import builtins
import io
import itertools
import keyword
import tokenize

THRESHOLD = 0.6
MIN_SHINGLES = 12
N = 5
# Names that say what the code does rather than what the learner called things.
KEPT_NAMES = frozenset(dir(builtins)) | {"tl", "triton", "torch", "math", "np", "numpy", "F", "nn", "self",
                                         "libdevice", "kl", "L"}


def tokens(source: str) -> list[str]:
    """``source`` as normalised tokens (see the module's docstring); [] when it does not tokenize."""
    from kernellab.notebook_source import to_python
    out: list[str] = []
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
            tokenize.ENDMARKER, tokenize.TYPE_COMMENT}
    try:
        stream = [t for t in tokenize.generate_tokens(io.StringIO(to_python(source)).readline) if t.type not in skip]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    for i, tok in enumerate(stream):
        nxt = stream[i + 1].type if i + 1 < len(stream) else tokenize.NEWLINE
        if tok.type == tokenize.NEWLINE:
            if out and out[-1] != ";":
                out.append(";")
        elif tok.type == tokenize.STRING and nxt == tokenize.NEWLINE and (not out or out[-1] in (";", ":")):
            continue  # a docstring or a string standing alone: a comment by another name
        elif tok.type == tokenize.STRING or tok.type in getattr(tokenize, "FSTRING_TYPES", ()):
            out.append("S")
        elif tok.type == tokenize.NAME and not keyword.iskeyword(tok.string) and tok.string not in KEPT_NAMES \
                and not (out and out[-1] == "."):
            out.append("v")
        else:
            out.append(tok.string)
    return out


def shingles(source: str, n: int = N) -> set:
    t = tokens(source)
    return {tuple(t[i:i + n]) for i in range(len(t) - n + 1)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def cells(nb) -> dict:
    """grade_id -> source of every nbgrader solution cell in ``nb`` (what the learner wrote)."""
    from kernellab.notebook_source import grade_id
    out = {}
    for c in nb.cells:
        meta = (c.get("metadata") or {}).get("nbgrader") or {}
        if c.cell_type == "code" and meta.get("solution") and grade_id(c):
            out[grade_id(c)] = c.source
    return out


def own_shingles(source: str, given: set) -> set:
    """The 5-grams of ``source`` that the release cell did not already hold."""
    return shingles(source) - given


def compare(submissions: dict, release_nb, solution_nb=None, threshold: float = THRESHOLD) -> list[dict]:
    """Pairs of submissions (student -> notebook) whose solution cells are at least ``threshold`` similar, and
    submissions that similar to the course's solution (as student ``SOLUTION``). One row per (pair, cell),
    most similar first: {"a", "b", "cell", "similarity", "shared"}."""
    from kernellab.grading.instructor.submissions import solution_texts
    given = {gid: shingles(src) for gid, src in cells(release_nb).items()}
    per: dict = {}
    for student, nb in submissions.items():
        for gid, src in cells(nb).items():
            if gid in given:
                per.setdefault(gid, {})[student] = own_shingles(src, given[gid])
    if solution_nb is not None:
        for gid, src in solution_texts(solution_nb).items():
            if gid in given:
                per.setdefault(gid, {})["SOLUTION"] = own_shingles(src, given[gid])
    rows = []
    for gid, by_student in per.items():
        kept = {s: sh for s, sh in by_student.items() if len(sh) >= MIN_SHINGLES}
        for a, b in itertools.combinations(sorted(kept, key=lambda s: (s != "SOLUTION", s)), 2):
            sim = jaccard(kept[a], kept[b])
            if sim >= threshold:
                rows.append({"a": a, "b": b, "cell": gid, "similarity": round(sim, 3),
                             "shared": len(kept[a] & kept[b])})
    rows.sort(key=lambda r: (-r["similarity"], r["cell"], r["a"], r["b"]))
    return rows
