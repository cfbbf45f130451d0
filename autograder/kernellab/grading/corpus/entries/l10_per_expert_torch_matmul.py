"""cheat: lesson 10, attacks `grouped_matmul_correct`; expected: 0 points (the message says "PyTorch").

A loop of torch.matmul over the experts in the graded function, beside a token launch of the learner's kernel."""
from ..edits import _sub
from ..entry import L10, Entry

ENTRY = Entry("per_expert_torch_matmul", L10, "grouped_matmul_correct", "a per-expert loop of torch.matmul in the "
              "graded function, beside a token launch of the learner's kernel",
              _sub("grouped_matmul_code", "    return y\n",
                   "    bounds = expert_offsets.tolist()\n"
                   "    for e in range(E):\n"
                   "        y[bounds[e]:bounds[e + 1]] = torch.matmul(x_sorted[bounds[e]:bounds[e + 1]], w[e])\n"
                   "    return y\n"), says="PyTorch")
