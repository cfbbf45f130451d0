"""Compare an output with a float64 reference and say, in words, what is wrong.

Relative error is ||out - ref|| / ||ref|| over the whole tensor: stable across sizes, so one
threshold per dtype works from n = 1 to n = 2**28 (GRADING.md: fp32 ~5e-7, fp16 ~4e-4).
"""
from __future__ import annotations

import dataclasses

import torch

# Per-dtype thresholds on relative error. Calibrated so that honest kernels sit >= 10x under
# (fp32 ~1e-7, fp16 ~3e-4 with fp32 compute, ~1e-3 computing in fp16) and known-wrong variants
# (a dropped term, a wrong index, fp16 accumulation over long reductions) >= 10x over.
REL_TOL = {
    torch.float64: 1e-10,
    torch.float32: 1e-5,
    torch.float16: 1e-2,
    torch.bfloat16: 5e-2,
    # integer outputs (indices, counts) are right or wrong: no tolerance
    torch.int32: 0.0,
    torch.int64: 0.0,
}
# Element-wise tolerance used only to *locate* wrong elements for hints.
ELEM_TOL = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1, torch.int32: 0.0,
            torch.int64: 0.0}


@dataclasses.dataclass
class Verdict:
    ok: bool
    rel_error: float | None
    message: str  # a paragraph for the learner; empty when ok


def rel_error(out: torch.Tensor, ref: torch.Tensor, floor: float = 0.0) -> float:
    """||out - ref|| / ||ref||, the denominator at least ``floor`` * sqrt(n): for an output whose rounding error
    follows a scale other than its own values (a log-sum-exp near 0 carries the error of scores near 1)."""
    out64, ref64 = out.detach().to("cpu", torch.float64), ref.detach().to("cpu", torch.float64)
    denom = max(torch.linalg.vector_norm(ref64).item(), floor * max(1, ref64.numel()) ** 0.5)
    num = torch.linalg.vector_norm(out64 - ref64).item()
    return num / denom if denom > 0 else num


def rel_error_on_device(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``rel_error``'s measure in float32 where the tensors are: for sweeps that compare many outputs of hundreds of
    millions of elements, which ``rel_error`` would copy to the host in float64 one by one."""
    out, ref = out.detach().float(), ref.detach().float()
    den = torch.linalg.vector_norm(ref).item()
    num = torch.linalg.vector_norm(out - ref).item()
    return num / den if den > 0 else num


def _ranges(idx: torch.Tensor, limit: int = 3) -> str:
    """'4096..4100, 9000' from sorted flat indices."""
    parts, start, prev = [], None, None
    for i in idx.tolist():
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(f"{start}" if start == prev else f"{start}..{prev}")
            start = prev = i
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}..{prev}")
    more = f" and {len(parts) - limit} more ranges" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


def _why_infinite(dtype: torch.dtype, ref: torch.Tensor) -> str:
    """Infinite where the right value is finite: an overflow only when the right values come near the largest
    number ``dtype`` holds. Otherwise the usual cause is a load that read past a row or the tensor (a missing
    mask) and summed whatever lay there; telling that learner to compute in float32 misled (issue 54: a missing K
    mask in an fp32-accumulating matmul)."""
    finite = ref[torch.isfinite(ref)]
    biggest = float(finite.abs().max()) if finite.numel() else 0.0
    if dtype.is_floating_point and biggest > torch.finfo(dtype).max / 16:
        return (f"The right values reach {biggest:.3g}, near the largest {str(dtype).replace('torch.', '')} "
                "holds: an overflow. Compute in float32 inside the kernel and convert only when storing.")
    return (f"The right values are at most {biggest:.3g} in size, so the {str(dtype).replace('torch.', '')} output "
            "did not overflow: the kernel used values it should not have, most often a load without a mask that "
            "read past the end of a row or of a tensor (check each tl.load's mask and other=), or an "
            "intermediate that grew without bound (an exponential of an unshifted value).")


def compare(out: torch.Tensor, ref: torch.Tensor, what: str = "output", block_hint: bool = True,
            floor: float = 0.0) -> Verdict:
    """Judge ``out`` (any dtype, CPU) against ``ref`` (float64, CPU); ``floor``: see rel_error."""
    tol = REL_TOL.get(out.dtype, 1e-5)
    o = out.detach().to("cpu", torch.float64).reshape(-1)
    r = ref.detach().to("cpu", torch.float64).reshape(-1)
    n = o.numel()
    nan = torch.isnan(o) & ~torch.isnan(r)
    if nan.any():
        idx = torch.nonzero(nan).reshape(-1)
        if idx.numel() == n:
            return Verdict(False, None, f"Every element of the {what} is NaN: it was never written. "
                           "Does the kernel store to the output pointer, and is the grid large enough?")
        first = int(idx[0])
        tail_only = idx.numel() == n - first
        if tail_only:
            hint = (f"Elements from index {first} on (of {n}) were never written (still NaN from the "
                    f"check's prefill). Is the grid big enough to cover the tail - "
                    f"triton.cdiv(n, BLOCK) programs, not n // BLOCK?")
        else:
            hint = (f"{idx.numel()} of {n} elements of the {what} are NaN (at {_ranges(idx)}). "
                    "Either they were never written, or the kernel computes NaN there.")
        return Verdict(False, None, hint)
    inf = torch.isinf(o) & ~torch.isinf(r)
    if inf.any():
        idx = torch.nonzero(inf).reshape(-1)
        return Verdict(False, None, f"{idx.numel()} elements of the {what} are infinite (at {_ranges(idx)}). "
                       + _why_infinite(out.dtype, r))
    err = rel_error(o, r, floor)
    if err <= tol:
        return Verdict(True, err, "")
    etol = ELEM_TOL.get(out.dtype, 1e-4)
    bad = (o - r).abs() > etol * (1 + r.abs())
    idx = torch.nonzero(bad).reshape(-1)
    detail = f"relative error {err:.2e} > {tol:.0e} allowed for {str(out.dtype).replace('torch.', '')}"
    if idx.numel() == 0:
        return Verdict(False, err, f"The {what} is close everywhere but not close enough ({detail}). "
                       "Is the arithmetic done in a lower precision than the inputs?")
    first = int(idx[0])
    if block_hint and idx.numel() == n - first and first > 0:
        return Verdict(False, err, f"Elements from index {first} on (of {n}) are wrong; everything before "
                       f"is right ({detail}). Is the tail masked - loads and stores with "
                       f"mask=offsets < n?")
    return Verdict(False, err, f"{idx.numel()} of {n} elements of the {what} are wrong, first at index {first} "
                   f"(got {o[first].item():.6g}, expected {r[first].item():.6g}; {detail}).")
