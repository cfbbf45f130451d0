"""cheat: lesson 10, attacks `routing_correct`; expected: 0 points (the message says "PyTorch").

The routing's top-k and softmax by torch.topk and torch.softmax, the permutation by the learner's kernels."""
from ..edits import _sub
from ..entry import L10, Entry

ENTRY = Entry("topk_with_torch", L10, "routing_correct", "torch.topk and torch.softmax for the routing in the graded "
              "function (the permutation by the learner's kernels)",
              _sub("route_code", "    counts, offsets, dest = permute(experts, E)\n",
                   "    vals, idx = torch.topk(logits, top_k, dim=1)\n"
                   "    weights, experts = torch.softmax(vals, dim=1), idx.to(torch.int32)\n"
                   "    counts, offsets, dest = permute(experts, E)\n"), says="PyTorch")
