"""honest control: lesson 10, attacks `routing_correct`; expected: full points.

The expert counts by tl.atomic_add (an order-free histogram) in place of the solution's first kernel; the
offsets, block bases and destinations as the solution's."""
from ..entry import L10, Entry

_ATOMIC_COUNT = '''@triton.jit
def block_count_kernel(experts_ptr, block_counts_ptr, S, E, BLOCK_S: tl.constexpr, BLOCK_E: tl.constexpr):
    pid = tl.program_id(0)
    slots = pid * BLOCK_S + tl.arange(0, BLOCK_S)
    ok = slots < S
    e = tl.load(experts_ptr + slots, mask=ok, other=0)
    tl.atomic_add(block_counts_ptr + pid * E + e, tl.full((BLOCK_S,), 1, tl.int32), mask=ok)
'''


def _edit(text):
    src = text["permute_code"]
    start = src.index("@triton.jit\ndef block_count_kernel")
    end = src.index("@triton.jit\ndef offsets_kernel")
    src = src[:start] + _ATOMIC_COUNT + "\n\n" + src[end:]
    old = "    block_counts = torch.empty((n_blocks, E)"
    assert old in src, "corpus: permute_code no longer allocates block_counts with torch.empty"
    return {"permute_code": src.replace(old, "    block_counts = torch.zeros((n_blocks, E)")}


ENTRY = Entry("route_with_atomic_counts", L10, "routing_correct", "the per-block expert counts by tl.atomic_add "
              "into a zeroed buffer (an order-free histogram)", _edit, expect="full")
