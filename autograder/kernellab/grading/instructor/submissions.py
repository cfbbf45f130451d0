"""Make submissions for dry runs and tests: the release notebook with the learner's cells filled in."""
from __future__ import annotations

import copy
import re

import nbformat

from kernellab.notebook_source import grade_id

_SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION\n(.*?)^[ \t]*### END SOLUTION\n?", re.S | re.M)


def solution_text(source: str) -> str:
    """The source with the solution markers removed (what a learner who solved it would have)."""
    return _SOLUTION.sub(lambda m: m.group(1), source)


def solution_texts(source_nb) -> dict:
    """grade_id -> solved source of every solution cell."""
    return {grade_id(c): solution_text(c.source) for c in source_nb.cells
            if ((c.get("metadata") or {}).get("nbgrader") or {}).get("solution")}


def known_wrong(lesson: str, source_nb) -> dict:
    """name -> overrides for ``filled``: submissions that must lose exactly the problems they break."""
    text = solution_texts(source_nb)

    def edit(gid, old, new):
        assert old in text[gid], f"{lesson}: the solution of {gid} no longer contains {old!r}"
        return {gid: text[gid].replace(old, new)}
    if lesson == "01_roofline_vector_add":
        return {
            "nomask": edit("add_code", ", mask=mask", ""),
            "torch_add": {"add_code": "def add(x, y):\n    return x + y\n"},
            "exit_in_fused": edit("silu_gate_code", "    out = torch.empty_like(x)",
                                  "    exit(3)\n    out = torch.empty_like(x)"),
            "illegal_address": edit("add_code", "tl.store(out_ptr + offsets, x + y, mask=mask)",
                                    "tl.store(out_ptr + offsets * 1000003, x + y)"),
            "slow_add": {"add_code": edit("add_code", "BLOCK = 4096", "BLOCK = 32")["add_code"].replace(
                "num_warps=8", "num_warps=1")},
        }
    if lesson == "02_tiled_matmul":
        k = text["matmul_code"]
        no_mask = (k.replace(", mask=rk[None, :] < k_left, other=0.0", "")
                   .replace(", mask=rk[:, None] < k_left, other=0.0", "")
                   .replace(", mask=(rm[:, None] < M) & (rn[None, :] < N))", ")"))
        assert no_mask.count("mask=") == k.count("mask=") - 3, "02: the masks of matmul_code changed"
        return {
            "no_tail_mask": {"matmul_code": no_mask},
            "wrong_strides": edit("matmul_code", "M, N, K, sam, sak, sbk, sbn, N, 1", "M, N, K, K, 1, N, 1, N, 1"),
            "fp16_accumulation": {"matmul_code": edit("matmul_code", "dtype=tl.float32)\n", "dtype=tl.float16)\n")[
                "matmul_code"].replace("acc = tl.dot(a, b, acc)", "acc = tl.dot(a, b, acc, out_dtype=tl.float16)")},
            "row_major_order": {"tile_of_code": "def tile_of(pid, num_pid_m, num_pid_n, group_m):\n"
                                                "    return pid // num_pid_n, pid % num_pid_n\n"},
            "epilogue_without_bias": edit("matmul_code", "        acc += tl.load(bias_ptr", "        acc += 0 * tl.load(bias_ptr"),
            # honest but slower: keep every correctness point, and the speed points their speed earns
            "one_config_no_grouping": {"matmul_code": text["matmul_code"].replace(
                "configs=CONFIGS,", "configs=CONFIGS[:1],").replace("GROUP_M=8", "GROUP_M=1")},
        }
    if lesson == "03_fused_softmax_layernorm":
        sm = text["softmax_code"]
        unmasked = sm.replace(", mask=mask, other=-float(\"inf\"))", ")").replace(", mask=mask)", ")")
        assert unmasked.count("mask=") == sm.count("mask=") - 2, "03: the masks of softmax_code changed"
        online = text["online_softmax_code"]
        loop = "    for start in range(0, n_cols, BLOCK):\n"
        # a first pass for the max alone, then the sum with the max known: three reads per element
        max_pass = (loop + "        cols = start + tl.arange(0, BLOCK)\n"
                    "        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float(\"inf\")).to(tl.float32)\n"
                    "        m = tl.maximum(m, tl.max(x, axis=0))\n")
        assert online.count(loop) == 2, "03: the loops of online_softmax_code changed"
        three = online.replace(loop, max_pass + loop, 1).replace(
            "m_new = tl.maximum(m, tl.max(x, axis=0))", "m_new = m")
        return {
            "no_max_subtraction": edit("softmax_code", "z = x - tl.max(x, axis=1)[:, None]", "z = x"),
            "unmasked_tail": {"softmax_code": unmasked},
            "zero_padding": edit("softmax_code", 'other=-float("inf"))', "other=0.0)"),
            "row_stride_from_cols": edit("softmax_code", "x.stride(0), out.stride(0)", "n_cols, n_cols"),
            "unbiased_variance": edit("add_layernorm_code", "axis=1) / n_cols + eps)", "axis=1) / (n_cols - 1) + eps)"),
            "output_with_x_stride": edit("add_layernorm_code", "x.stride(0), residual.stride(0), out.stride(0)",
                                         "x.stride(0), residual.stride(0), x.stride(0)"),
            "one_pass_variance": edit("add_layernorm_code",
                                      "rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=1) / n_cols + eps)",
                                      "rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=1) / n_cols - mean * mean + eps)"),
            "three_pass_online": {"online_softmax_code": three},
        }
    if lesson == "04_flash_attention":
        return {
            # the accumulator and sum are not rescaled when the running max grows
            "no_rescaling": {"flash_attention_code": edit("flash_attention_code", "l_i = l_i * alpha + tl.sum(p, 1)",
                                                          "l_i = l_i + tl.sum(p, 1)")["flash_attention_code"].replace(
                "acc * alpha[:, None])", "acc)")},
            "causal_off_by_one": edit("flash_attention_code", "cols[None, :] <= rows[:, None]",
                                      "cols[None, :] < rows[:, None]"),
            "missing_tail_mask": edit("flash_attention_code", "            keep = cols[None, :] < n_keys\n",
                                      "            keep = cols[None, :] >= 0  # every key counts\n"),
            # O(N^2) memory: the scores of one head written to a scratch buffer first
            "scores_scratch": edit("flash_attention_code", "    lse = torch.empty((B, H, N), dtype=torch.float32, "
                                   "device=q.device)\n", "    lse = torch.empty((B, H, N), dtype=torch.float32, "
                                   "device=q.device)\n    scratch = torch.empty((B, H, N, N), dtype=q.dtype, "
                                   "device=q.device)\n"),
        }
    if lesson == "05_flash_attention_backward":
        return {
            "dk_without_scale": edit("flash_backward_code", "    dk *= sm_scale", "    dk *= 1.0"),
            "causal_off_by_one": edit("flash_backward_code", "keep = keep & (cols[:, None] <= rows[None, :])",
                                      "keep = keep & (cols[:, None] < rows[None, :])"),
            "forward_returns_lse": edit("attention_function_code", "        return o\n", "        return o, lse\n"),
        }
    if lesson == "06_profile_first":
        return {
            # the LayerNorm gradient as if mean and variance were constants: wrong dx, so the block's too
            "ln_without_mean_terms": edit("layernorm_function_code", "dh = rstd * (gw - gw.mean(dim=1, keepdim=True) "
                                          "- hat * (gw * hat).mean(dim=1, keepdim=True))", "dh = rstd * gw"),
            # PyTorch's LayerNorm inside the Function's forward: right numbers, not the learner's kernel
            "torch_layernorm_forward": edit("layernorm_function_code", "        y = add_layernorm(",
                                            "        y = F.layer_norm(x + residual, (d,), weight, bias, eps)\n"
                                            "        y = add_layernorm("),
            # the library's attention in the block: right numbers and fast, but not the learner's kernel
            "sdpa_in_block": edit("block_code", "FlashAttention.apply(q, k, v, True)",
                                  "F.scaled_dot_product_attention(q, k, v, is_causal=True)"),
        }
    if lesson == "07_ship_it":
        return {
            # stage 2 adds up only the first program's partial sums: dweight and dbias wrong, the compiled block too
            "partials_of_one_program": edit("ln_backward_code", "mask = (parts[:, None] < n_parts) & col_ok[None, :]",
                                            "mask = (parts[:, None] < 1) & col_ok[None, :]"),
            # no fake implementation for the LayerNorm op: torch.compile cannot trace the block
            "no_fake_impl": edit("custom_ops_code", "@add_layernorm_op.register_fake\ndef _(x, residual, weight, bias, "
                                 "eps):\n", "def _unused_fake(x, residual, weight, bias, eps):\n"),
            # the library's attention inside the op, behind a token launch of the learner's kernel
            "sdpa_in_op": edit("custom_ops_code", "    return flash_attention(q, k, v, causal)\n",
                               "    o, lse = flash_attention(q, k, v, causal)\n"
                               "    return F.scaled_dot_product_attention(q, k, v, is_causal=causal), lse\n"),
            # the worked example's fake with lesson 04's layout: the op returns a token-major O, the fake says
            # (B, H, N, D) contiguous, and the compiled code after the op would read O wrongly
            "fake_strides": edit("custom_ops_code", "    o = q.new_empty((B, N, H, D)).transpose(1, 2)",
                                 "    o = q.new_empty((B, H, N, D))"),
            # torch.compile of the eager block with SDPA inside the graded function
            "compile_in_block": {"block_code": "FAST = torch.compile(lambda x, p, h: L.block_eager(\n"
                                               "    x, p, h, attend=L.attention_sdpa))\n\n\n"
                                               "def block_forward(x, params, n_heads):\n"
                                               "    return FAST(x, params, n_heads)\n"},
        }
    if lesson == "08_hopper":
        return {
            # no fallback for rows TMA refuses: K = 1500 (3000-byte rows) fails in the descriptor
            "no_padding": edit("matmul_code", "    a = a if L.tma_legal(a) else with_legal_rows(a.contiguous())\n", ""),
            # the scales applied twice: the inputs' scales once more on the accumulator
            "scale_twice": edit("fp8_code", "        acc = acc * scale\n", "        acc = acc * scale * scale\n"),
            # the partial last key block in the unmasked loop: TMA reads keys past N as zeros, whose score is 0, not
            # -inf, so they take a share of every row's softmax
            "zero_filled_keys": edit("attention_code", "        full = (N_CTX // BLOCK_N) * BLOCK_N\n",
                                     "        full = tl.cdiv(N_CTX, BLOCK_N) * BLOCK_N\n"),
            # the library's attention behind a token launch of the learner's kernel
            "sdpa_behind_launch": edit("attention_code", "    return o, lse\n",
                                       "    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))\n"
                                       "    return o, lse\n"),
        }
    if lesson == "09_serve_it":
        return {
            # the merge exponentiates each split's lse as it is: exp(500) overflows float32
            "merge_without_max": edit("merge_code", "    m_row = tl.where(m_row == -float(\"inf\"), 0.0, m_row)",
                                      "    m_row = 0.0  # the max is not subtracted"),
            # query head hq paired with KV head hq % HKV (heads interleaved, not grouped)
            "gqa_interleaved": edit("decode_code", "    heads = h * GROUP + g\n", "    heads = h + g * Hkv\n"),
            # masked keys keep the score of their zero-filled load (0) instead of -inf: the partial block's tail
            # takes a share of the softmax
            "tail_scores_zero": edit("decode_code", "        s = tl.where(keep[None, :], s, -float(\"inf\"))\n", ""),
            # the block table ignored: page b * max_pages + j instead of block_table[b, j]
            "pages_in_order": edit("decode_code", "            page = tl.load(table_ptr + b * stride_tb + cols // PAGE, mask=keep, other=0).to(tl.int64)",
                                   "            page = (b * stride_tb + cols // PAGE).to(tl.int64)"),
        }
    if lesson == "10_mixture_of_experts":
        return {
            # ties to the higher expert index: only tied logits tell
            "ties_to_last": edit("topk_code", "tl.min(tl.where(x == best[:, None], cols[None, :], BLOCK_E), 1)",
                                 "tl.max(tl.where(x == best[:, None], cols[None, :], -1), 1)"),
            # inclusive prefix sum for the offsets: every expert starts where it should end
            "inclusive_offsets": edit("permute_code", "starts = tl.cumsum(total, 0) - total", "starts = tl.cumsum(total, 0)"),
            # dW keeps only the last block of each expert's rows: right only for experts of at most BLOCK_M rows
            "dw_last_block": edit("backward_code", "acc = tl.dot(xt, dy, acc)", "acc = tl.dot(xt, dy)"),
        }
    return {}


def filled(release_nb, source_nb, overrides: dict | None = None, drop: tuple = ()):
    """A release notebook whose solution cells hold the reference solution, except ``overrides``
    (grade_id -> new source); cells whose grade_id is in ``drop`` are deleted."""
    nb = copy.deepcopy(release_nb)
    solutions = solution_texts(source_nb)
    overrides = overrides or {}
    cells = []
    for c in nb.cells:
        gid = grade_id(c)
        if gid in drop:
            continue
        if gid in overrides:
            c.source = overrides[gid]
        elif gid in solutions:
            c.source = solutions[gid]
        cells.append(c)
    nb.cells = cells
    return nb


def read(path):
    return nbformat.read(str(path), as_version=4)


def write(nb, path):
    nbformat.write(nb, str(path))
