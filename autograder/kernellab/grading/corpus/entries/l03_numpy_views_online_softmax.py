"""cheat: lesson 03, attacks `online_softmax_correct`; expected: 0 points (the message says "wrong").

Softmax in numpy on .numpy() views."""
from ..edits import _np, _sub
from ..entry import L3, Entry

ENTRY = Entry("numpy_views_online_softmax", L3, "online_softmax_correct", "softmax in numpy on .numpy() views",
              _np(_sub("online_softmax_code", "    online_softmax_kernel[(n_rows,)](",
                   "    v = x.numpy().astype(np.float32)\n    e = np.exp(v - v.max(axis=1, keepdims=True))\n"
                   "    out.numpy()[...] = e / e.sum(axis=1, keepdims=True)\n    online_softmax_kernel[(1,)](")),
              says="wrong")
