"""Honest and deliberately broken element-wise kernels for the check tests."""
import torch
import triton
import triton.language as tl


@triton.jit
def add_masked(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def add_unmasked(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


@triton.jit
def add_store_mask_only(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # loads unmasked (reads past the end), store masked: the output is still right
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs), mask=offs < n)


@triton.jit
def add_no_store(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    _ = tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m)


@triton.jit
def add_nan(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, (x + tl.load(y_ptr + offs, mask=m)) * (x - x) / (x - x), mask=m)


@triton.jit
def add_tail_wrong(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m)
    v = tl.where(offs >= (n // BLOCK) * BLOCK, v * 2, v)  # only the last partial block is off
    tl.store(out_ptr + offs, v, mask=m)


@triton.jit
def sub_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) - tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def not_compiling(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + undefined_name)  # noqa: F821


def launcher(kernel, block=1024, grid=None, warps=4):
    def add(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        g = grid(n, block) if grid else (triton.cdiv(n, block),)
        kernel[g](x, y, out, n, BLOCK=block, num_warps=warps)
        return out
    return add


@triton.jit
def silu_gate_in_input_dtype(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # honest but sloppy: no upcast to fp32 (the worst legitimate variant for the threshold)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x * (1 / (1 + tl.exp(-x.to(tl.float32)))).to(x.dtype) * y + x, mask=m)


@triton.jit
def silu_gate_dropped_term(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=m).to(tl.float32)
    tl.store(out_ptr + offs, (x * tl.sigmoid(x) * y).to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def add_block_of_64(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 64 == 0, "BLOCK must be a multiple of 64")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
