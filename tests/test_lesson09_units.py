"""Lesson 09 without nbgrader: the references agree with each other (paged with contiguous, the merge with one
softmax over all keys), the checks fail the classic decode bugs with the hint that names them, the GQA read count
fails a program per query head, and the split widget's launch model (about 25 s on 2 cores)."""
import math

import pytest
import torch

from kernellab.grading.instructor.submissions import known_wrong, read
from kernellab.learner import _correctness
from kernellab.lessons import lesson09 as L
from kernellab.notebook_cells import load_solution
from kernellab.paths import repo_root
from kernellab.problems.base import judge_answers, seeded_generator

SRC = read(repo_root() / "solutions" / L.LESSON / f"{L.LESSON}.ipynb")
WRONG = known_wrong(L.LESSON, SRC)
NAMES = ("decode_attention", "paged_decode_attention", "merge_partials")


@pytest.fixture(scope="module")
def solution():
    return load_solution(L.LESSON, NAMES)


def test_the_paged_reference_equals_the_contiguous_one_and_skips_other_sequences_pages():
    gen = torch.Generator().manual_seed(1)
    lens = torch.tensor([37, 1, 20], dtype=torch.int32)
    q, k, v = L.cache(gen, 3, 4, 2, 40, 16, lens)
    kp, vp, table = L.page_cache(gen, k, v, lens, 16)
    assert not torch.isnan(kp[table[0, :3].long()].reshape(-1, 2, 16)[:37]).any()  # the live rows are real
    assert int(table[1, 1]) in table[2].tolist()  # past its one page, sequence 1's table names sequence 2's pages
    a, b = L.decode_reference(q, k, v, lens), L.decode_reference(q, kp, vp, lens, block_table=table)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    # a single key: the output is its value row, the lse its score
    assert torch.allclose(a[0][1], v[1, torch.arange(4) // 2, 0].double())
    s = (q[1].double() * k[1, torch.arange(4) // 2, 0].double()).sum(-1) / 4.0
    assert torch.allclose(a[1][1], s)


def test_merging_splits_equals_attention_over_all_keys():
    gen = torch.Generator().manual_seed(2)
    lens = torch.tensor([50], dtype=torch.int32)
    q, k, v = L.cache(gen, 1, 2, 1, 50, 16, lens)
    whole = L.decode_reference(q, k, v, lens)
    parts = [L.decode_reference(q, k[:, :, lo:lo + 16], v[:, :, lo:lo + 16], torch.tensor([min(16, 50 - lo)]))
             for lo in range(0, 50, 16)]
    o, lse = L.merge_reference(torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts]))
    assert torch.allclose(o, whole[0]) and torch.allclose(lse, whole[1])


def test_merge_cases_hold_empty_splits_but_no_empty_row():
    for case in L.MERGE.make_cases(seeded_generator(3), False):
        o, lse = case.inputs
        assert torch.isfinite(lse).any(0).all()
        assert torch.equal(torch.isnan(o).all(-1), lse == -math.inf)


def test_the_bugs_the_round_trip_leaves_out_fail_with_their_hint():
    # (the merge's overflow and interleaved GQA heads are graded in tests/test_roundtrip_lesson09.py)
    for bug, problem, fn, hint in [("tail_scores_zero", L.DECODE, "decode_attention", "score -inf"),
                                   ("pages_in_order", L.PAGED, "paged_decode_attention", "Wrong result")]:
        bad = load_solution(L.LESSON, NAMES, WRONG[bug])[fn]
        out = _correctness(problem, bad)
        assert out.fraction == 0 and hint in out.message, (bug, out.message)


def per_query_head_decode():
    """The corpus's correct decode with one program per query head (its cell, run as a learner's would be)."""
    from kernellab.grading.corpus.entries.l09_decode_program_per_query_head import _PER_HEAD
    from kernellab.notebook_cells import exec_cells, new_namespace
    ns = new_namespace(L.LESSON)
    exec_cells([_PER_HEAD], ns, tag="per-query-head")
    return ns["decode_attention"]


def test_a_program_per_query_head_is_right_but_reads_the_cache_group_times(solution):
    assert _correctness(L.GQA_READS, solution["decode_attention"]).passed
    out = _correctness(L.GQA_READS, per_query_head_decode())  # "Correct, but ...": only its reads are wrong
    assert out.fraction == 0 and out.message.startswith("Correct, but")
    assert "reads the whole cache G times" in out.message


def test_the_answers_and_their_bound():
    s = L.ANSWER_SHAPE
    b = 2 * s["B"] * s["CTX"] * s["HKV"] * s["D"] * 2
    f = 4 * s["HQ"] * s["B"] * s["CTX"] * s["D"]
    facts = {"bound": lambda i: "memory" if i < 100 else "compute"}
    out = judge_answers(L.ANSWERS, dict(zip(L.ANSWERS.names, (b, f, 4.0, "memory"))), facts)
    assert out.passed and f / b == 4.0
    out = judge_answers(L.ANSWERS, dict(zip(L.ANSWERS.names, (b / 4, f, 16.0, "compute"))), facts)
    assert out.details["right"] == 1


def test_the_split_model_rewards_splitting_a_mixed_batch_and_counts_every_key():
    from kernellab.lessons.l09_serve_it.widgets import schedule
    lens = [32768] + [2048] * 31
    one, many = schedule(lens, 8, 1, 132), schedule(lens, 8, 16, 132)
    assert one["makespan"] > 3 * many["makespan"]  # one split: the longest sequence runs alone at the end
    keys = sum(cost - 32 for lane in many["lanes"] for _, cost, _ in lane)
    assert keys == 8 * sum(lens) and many["programs"] == 16 * 8 * 32


def test_pick_splits_uses_shapes_only_and_fills_the_sms(solution):
    pick = solution["pick_splits"]
    assert pick(1, 8, 32768, 132) * 8 >= 132  # one long sequence: at least one program per SM
    assert pick(64, 8, 32768, 132) < pick(1, 8, 32768, 132)  # a bigger batch fills the SMs with fewer splits
    assert pick(1, 8, 1000, 132) <= 4  # never pieces of fewer than MIN_SPLIT (256) keys
    assert pick(1, 1, 1, 132) == 1


def test_the_copy_baseline_moves_the_live_caches_bytes_at_the_speed_shape():
    s = L.SPEED_SHAPE
    k = torch.empty(s["B"], s["HKV"], s["N_MAX"], s["D"], dtype=torch.float16, device="meta")
    lens = torch.tensor(L.spaced_lengths(s["B"], s["LO"], s["N_MAX"]), dtype=torch.int32)[torch.randperm(s["B"])]
    assert L.copy_bytes([None, k, None, lens]) == L.live_cache_bytes([None, k, None, lens])
    assert int(lens.min()) == s["LO"] and int(lens.max()) == s["N_MAX"]


def test_the_bench_needs_a_gpu_and_its_report_is_written_from_times(tmp_path):
    from kernellab.lessons.l09_serve_it import bench
    assert bench.bench_lesson09(quick=True) is None
    # the paged copy the bench times finds every live key where the contiguous cache has it
    gen = torch.Generator().manual_seed(4)
    lens = torch.tensor([40, 17], dtype=torch.int32)
    q, k, v = L.cache(gen, 2, 4, 2, 48, 16, lens)
    kp, vp, table = bench._paged_copy(k, v, 16, gen)
    a, b = L.decode_reference(q, k, v, lens), L.decode_reference(q, kp, vp, lens, block_table=table)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    # the report from made-up times: 1.0 ms for the copy, so each contender's copy fraction is 1 / its time
    times = {"solution": 1.25, "paged": 1.3, "SDPA": 1.9, "copy": 1.0}

    def row(**kw):
        base = {"HQ": 32, "HKV": 8, "live_gb": 2.0, "splits": 16, "error": 1e-4, "paged_error": 1e-4} | kw
        return bench.with_times(base, dict(times), dict(times))
    res = {"main": row(B=32, N_MAX=32768, D=128, flex_missing="not here"),
           "grid": [row(B=1, N_MAX=1024, D=64)],
           "splits": [{"splits": 16, "ms": 1.25, "gb_per_s": 1600, "chosen": True}]}
    assert res["main"]["solution_course_copy_fraction"] == 0.8 and res["main"]["paged_vs_contiguous_course"] < 1
    bench.write_lesson09(res, tmp_path)
    md = (tmp_path / "lesson09.md").read_text()
    assert "| solution | 1.250 | 1.250 | 80 | 80 |" in md and "| 16 * | 1.250 |" in md and "not here" in md
    assert (tmp_path / "lesson09.json").exists()
