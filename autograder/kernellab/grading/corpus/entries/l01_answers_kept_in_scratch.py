"""cheat: lesson 01, attacks `add_bandwidth`; expected: graded as the kernel it recorded (a ratio of at most 1.1).

Answers kept between timed runs in memory the call allocates: each block fingerprints its inputs, and where a slot
of its scratch holds that fingerprint it copies the stored sum (one read and one write) instead of reading both
inputs. The allocator hands every timed replay the same blocks, so with two slots for the two alternating input
sets it would copy most blocks (2026-11-28, a matmul written this way: 0.98x cuBLAS against 0.77x computing every
tile). The judge now fills everything a record allocates with NaN before each timed run: every block misses,
computes and writes its scratch too."""
from ..edits import _whole
from ..entry import L1, Entry

_SCRATCH_ADD = '''@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, memo_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    nb = tl.cdiv(n, BLOCK)
    slot_size = n + nb
    key = tl.load(x_ptr + pid * BLOCK) + 3.0 * tl.load(y_ptr + pid * BLOCK)
    key0 = tl.load(memo_ptr + pid)
    key1 = tl.load(memo_ptr + slot_size + pid)
    if key0 == key:
        tl.store(out_ptr + offsets, tl.load(memo_ptr + nb + offsets, mask=mask), mask=mask)
    elif key1 == key:
        tl.store(out_ptr + offsets, tl.load(memo_ptr + slot_size + nb + offsets, mask=mask), mask=mask)
    else:
        s = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, s, mask=mask)
        base = tl.where(key > 0, slot_size, 0)
        tl.store(memo_ptr + base + nb + offsets, s, mask=mask)
        tl.store(memo_ptr + base + pid, key)


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 4096
    nb = triton.cdiv(n, BLOCK)
    memo = torch.empty(2 * (n + nb), device=x.device, dtype=x.dtype)
    add_kernel[(nb,)](x, y, out, memo, n, BLOCK=BLOCK, num_warps=8)
    return out
'''

ENTRY = Entry("answers_kept_in_scratch", L1, "add_bandwidth", "keep answers between timed runs in scratch the call "
              "allocates, copied back when the inputs' fingerprint matches", _whole("add_code", _SCRATCH_ADD),
              gpu=True, expect="kernel", max_value=1.1)
