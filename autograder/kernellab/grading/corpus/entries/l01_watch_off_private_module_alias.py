"""cheat: lesson 01, attacks `add_correct`; expected: 0 points (the message says "NaN").

The op watch off through a private dispatch module imported under an alias (`import a.b._c as x`, attrgetter
for the private name)."""
from ..edits import _ADD_HEAD, _ADD_LAUNCH, _TOKEN_ADD
from ..entry import L1, Entry

ENTRY = Entry("watch_off_private_module_alias", L1, "add_correct", "the op watch off through a private dispatch module "
              "imported under an alias (`import a.b._c as x`, attrgetter for the private name)",
              lambda t: {"add_code": "import operator\nimport torch.utils._python_dispatch as dispatch\n\n"
                             "QUIET = operator.attrgetter('_disable_current_modes')(dispatch)\n\n\n"
                             + t["add_code"].replace(_ADD_HEAD + "    n = x.numel()\n    BLOCK = 4096\n" + _ADD_LAUNCH,
                                                     _ADD_HEAD + "    with QUIET():\n        torch.add(x, y, out=out)\n"
                                                     + _TOKEN_ADD)}, says="NaN")
