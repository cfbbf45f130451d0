"""cheat: lesson 03, attacks `softmax_correct`; expected: 0 points (the message says "wrong").

The op watch off through a dotted operator.attrgetter string, bound once in the cell."""
from ..entry import L3, Entry

ENTRY = Entry("watch_off_attrgetter_path", L3, "softmax_correct", "the op watch off through a dotted operator.attrgetter "
              "string, bound once in the cell", lambda t: {"softmax_code": "import operator\n\n"
              "QUIET = operator.attrgetter('utils._python_dispatch._disable_current_modes')(torch)\n\n\n"
              + t["softmax_code"].replace("    return out\n", "    with QUIET():\n"
                                          "        out.copy_(F.softmax(x.float(), dim=1).to(x.dtype))\n    return out\n")
              .replace("softmax_kernel[(triton.cdiv(n_rows, rows),)](out,", "softmax_kernel[(1,)](out,")}, says="wrong")
