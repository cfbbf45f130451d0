"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "replaced functions the grader relies on").

Replace the grader's op watch in its own process."""
from ..edits import _whole
from ..entry import L1, Entry

ENTRY = Entry("patch_watch_by_alias", L1, "add_correct", "replace the grader's op watch in its own process",
              _whole("add_code", "base = kl.problems.base\n\nclass _Fake:\n    launches, torch_ops, allocations = 1, [], []\n"
                     "    def misuse(self, call):\n        return None\n    def owns(self, t):\n        return True\n\n"
                     "class _Ctx:\n    def __enter__(self):\n        return _Fake()\n    def __exit__(self, *a):\n"
                     "        return False\n\nbase.watched = lambda: _Ctx()\n\ndef add(x, y):\n    return x + y\n"),
              says="replaced functions the grader relies on")
