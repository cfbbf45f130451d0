"""Replay a recorded call (record.py) on fresh inputs: what the judge checks and times.

A replay allocates the buffers the record names (inputs are the judge's own), does the recorded torch
calls (zero_, fill_, copies), launches the recorded kernels with every pointer moved to the same offset in
the judge's buffers, and returns views of the buffers the call returned. A problem whose call may use
PyTorch ops (lesson 06's block: cuBLAS for the linear layers) gives the judge an op rule (op_rules.py): the
recorded ops are checked against it before anything runs, then done by the judge itself in their place. On a GPU the kernels are the
learner's compiled binaries, loaded from Triton's cache files (no Python of the learner's is imported); in
the CPU interpreter they are rebuilt from checked, pure-Triton source (kernel_source.py).

Limits keep a forged record from exhausting the judge: a record is refused when it has too many events,
buffers or grid programs, or asks for more memory than the problem could need.
"""
from __future__ import annotations

import os
import re
import types

import torch

from .guarded import Guarded, span_of
from .invoke import Refused
from .kernel_source import build as build_source_kernel, constant_from_json, frontend_problems
from .record import ALLOC, INPUT, MAX_BUFFERS, MAX_EVENTS, OP, TOO_MANY_STEPS, dtype_name, whole_storage

MAX_PROGRAMS = 1 << 31
MAX_ALLOC_BYTES = 48 << 30  # refused from the record alone
# ... and from the inputs: a call may allocate 32 times its inputs' bytes (split-K's fp32 partial sums, attention's
# log-sum-exps and scratch), at least 4 GiB
ALLOC_PER_INPUT_BYTE, MIN_ALLOC_BOUND = 32, 4 << 30


class ReplayError(Refused):
    """The record cannot be replayed; the message says why, for the learner (describe_exception says it as
    it is, like any refusal)."""


def dtype_of(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ReplayError(f"unknown dtype {name!r} in the record")
    return dt


def validate(rec: dict, n_inputs: int) -> None:
    """Refuse records no honest call produces, before allocating anything."""
    if rec.get("problem"):
        raise ReplayError(f"What the call did cannot be replayed: {rec['problem']}.")
    if len(rec.get("events", [])) > MAX_EVENTS or len(rec.get("buffers", [])) > MAX_BUFFERS:
        raise ReplayError(TOO_MANY_STEPS)
    total = 0
    for b in rec.get("buffers", []):
        if b.get("kind") == INPUT:
            if not (isinstance(b.get("index"), int) and 0 <= b["index"] < n_inputs):
                raise ReplayError("The record names an input the call does not have.")
        elif b.get("kind") == ALLOC:
            dt = dtype_of(b["dtype"])
            total += span_of(b["shape"], b["strides"]) * torch.empty((), dtype=dt).element_size()
        elif b.get("kind") == OP:
            dtype_of(b.get("dtype", ""))
        else:
            raise ReplayError("The record names a buffer of an unknown kind.")
    if total > MAX_ALLOC_BYTES:
        raise ReplayError(f"The call allocated {total / 2**30:.1f} GiB, more than any problem here needs.")
    if not any(e.get("op") == "launch" for e in rec.get("events", [])):
        raise ReplayError("The call launched no Triton kernel. Launch yours with kernel[grid](...).")
    for e in rec["events"]:
        if e.get("op") == "launch":
            g = e.get("grid", [])
            if len(g) != 3 or any(not isinstance(x, int) or x < 0 for x in g) or g[0] * g[1] * g[2] > MAX_PROGRAMS:
                raise ReplayError("The record has a launch with an impossible grid.")
            if e.get("kernel") not in rec.get("kernels", {}):
                raise ReplayError("The record launches a kernel it does not carry.")


class Kernels:
    """The record's kernels, rebuilt once and launched many times."""

    def __init__(self, rec: dict, folder: str | None, interpreted: bool):
        self.entries = rec.get("kernels", {})
        self.folder = folder
        self.interpreted = interpreted
        self.built: dict = {}

    def check_compiles(self, launches: list) -> None:
        """Refuse source kernels that Triton's own compiler refuses as launched (kernel_source.frontend_problems):
        the interpreter would run, as Python in the judge, what the compiler rejects."""
        for e in launches:
            args = e.get("args")
            if not isinstance(args, list) or any(not (isinstance(a, list) and len(a) == 2 and isinstance(a[0], str)
                                                      and isinstance(a[1], dict)) for a in args):
                raise ReplayError("The record has a launch whose arguments the judge cannot read.")
        refused = frontend_problems(self.entries, launches)
        if refused:
            why = refused[min(refused, key=lambda k: k[1])]
            raise ReplayError(f"Not a Triton kernel: {why}. The grader runs a kernel only after Triton's compiler "
                              "has accepted it for a GPU; write the whole kernel in triton.language.")

    def get(self, kid: str):
        if kid not in self.built:
            entry = self.entries[kid]
            if entry.get("kind") == "source":
                if not self.interpreted:
                    raise ReplayError("A kernel recorded in the interpreter cannot be replayed on a GPU.")
                try:
                    self.built[kid] = build_source_kernel(self.entries, kid, {})
                except ValueError as exc:
                    raise ReplayError(f"Not a pure Triton kernel: {exc}. A kernel may use triton.language, "
                                      "constants and other @triton.jit functions only.") from None
            elif entry.get("kind") == "binary":
                if self.interpreted:
                    raise ReplayError("A compiled kernel cannot be replayed in the interpreter.")
                self.built[kid] = _load_binary(entry, self.folder)
            else:
                raise ReplayError("The record carries a kernel of an unknown kind.")
        return self.built[kid]


# Argument types a launch may have. Triton writes a C launcher from the signature, so a forged type string
# would be code in the judge: only these pass.
_SCALAR = r"(i1|i8|i16|i32|i64|u1|u8|u16|u32|u64|fp8e4nv|fp8e5|fp8e4b15|fp8e4b8|fp8e5b16|fp16|bf16|fp32|fp64)"
_TYPE = re.compile(rf"^(\*k?{_SCALAR}|{_SCALAR}|constexpr)$")
# Inductor names the Triton kernels it generates by what they fuse: triton_poi_fused_add_0, triton_red_..., ...
_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem|for|mm|bmm|unk|helper)_")


# What a course kernel's compiled metadata may ask of the launcher, checked before anything is allocated: a record's
# metadata is the worker's to write, and a global_scratch_size of 2^38 made the judge try to allocate 256 GiB and
# more (an out-of-memory failure that the class queue answers with a regrade alone on the GPU: 2026-11-28).
METADATA_BOUNDS = {"shared": 232448, "tmem_size": 512, "global_scratch_size": 1 << 16, "global_scratch_align": 4096,
                   "profile_scratch_size": 1 << 16, "profile_scratch_align": 4096}
MAX_SCRATCH_BYTES = 1 << 30  # a launch's global scratch over all its programs


def metadata_problem(metadata: dict) -> str | None:
    """Why a recorded kernel's metadata asks the launcher for more than any course kernel needs, or None."""
    for field, most in METADATA_BOUNDS.items():
        v = metadata.get(field, 0)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= most:
            return f"its metadata asks for {field} = {str(v)[:20]}, beyond what a course kernel needs (at most {most})"
    if metadata.get("num_warps", 4) not in (1, 2, 4, 8, 16, 32) or metadata.get("num_ctas", 1) not in (1, 2, 4):
        return "its metadata has a number of warps or CTAs no compiled kernel has"
    dims = metadata.get("cluster_dims", [1, 1, 1]) or [1, 1, 1]
    if not isinstance(dims, (list, tuple)) or any(not isinstance(d, int) or not 1 <= d <= 8 for d in dims):
        return "its metadata asks for a cluster shape no course kernel uses"
    return None


def scratch_problem(metadata, grid) -> str | None:
    """Why one launch's global scratch (per program, times its programs) is too large to allocate, or None."""
    per = (getattr(metadata, "global_scratch_size", 0) or 0) + (getattr(metadata, "profile_scratch_size", 0) or 0)
    programs = grid[0] * grid[1] * grid[2]
    if per * programs > MAX_SCRATCH_BYTES:
        return (f"a launch of {programs} programs asks for {per * programs / 2**30:.1f} GiB of scratch, more than "
                "any course kernel needs")
    return None


def signature_problem(entry: dict, metadata: dict) -> str | None:
    """Why a recorded binary kernel's signature or metadata cannot be trusted to build a launcher, or None."""
    sig = entry.get("signature")
    if not isinstance(sig, dict) or list(sig) != list(entry.get("arg_names", [])):
        return "its signature does not match its argument names"
    for name, ty in sig.items():
        if not isinstance(ty, str) or not _TYPE.match(ty):
            return f"its argument `{name}` has a type ({str(ty)[:40]}) a course kernel does not have"
    if metadata.get("tensordesc_meta"):
        return "it takes tensor descriptors, which this judge does not replay yet"
    target = metadata.get("target") or {}
    if not isinstance(target, dict) or target.get("backend") != "cuda":
        return "it was not compiled for CUDA"
    if not isinstance(metadata.get("name"), str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", metadata["name"]):
        return "its name is not a kernel name"
    why = metadata_problem(metadata)
    if why:
        return why
    if _INDUCTOR.match(metadata["name"]):
        return (f"`{metadata['name']}` was generated by torch.compile (Inductor), not written in the notebook; "
                "a graded function launches its own kernels")
    return None


def _load_binary(entry: dict, folder: str):
    """A CompiledKernel from the recorded cache files, with the signature it was compiled for."""
    import json

    from triton.compiler.compiler import CompiledKernel

    group = {}
    for fname, local in entry.get("files", {}).items():
        path = os.path.join(folder, os.path.basename(local))
        if not os.path.isfile(path):
            raise ReplayError("The record is missing a kernel file.")
        group[fname] = path
    meta = [p for f, p in group.items() if f.endswith(".json")]
    if len(meta) != 1:
        raise ReplayError("The record is missing a kernel's metadata.")
    try:
        metadata = json.loads(open(meta[0]).read())
    except ValueError:
        raise ReplayError("A kernel's metadata in the record is not JSON.") from None
    why = signature_problem(entry, metadata if isinstance(metadata, dict) else {})
    if why:
        raise ReplayError(f"A recorded kernel cannot be replayed: {why}.")

    def key(k):
        return tuple(k) if isinstance(k, list) else k
    src = types.SimpleNamespace(
        signature={k: (tuple(v) if isinstance(v, list) else v) for k, v in entry["signature"].items()},
        constants={key(k): v for k, v in entry.get("constants", [])},
        fn=types.SimpleNamespace(arg_names=list(entry["arg_names"]), launch_metadata=None),
        attrs={})
    kernel = CompiledKernel(src, group, entry.get("hash", ""))
    kernel._init_handles()  # loads the binary: fails here, not in the middle of a timed run
    return kernel


class Replay:
    """One record, ready to run on the judge's inputs any number of times."""

    def __init__(self, rec: dict, folder: str | None, device: str, n_inputs: int, rule=None):
        validate(rec, n_inputs)
        ops = [e for e in rec["events"] if e.get("op") == "aten"]
        if ops and rule is None:
            raise ReplayError(f"The call computed with PyTorch ({ops[0].get('name')}): a graded function must do "
                              "its arithmetic in a Triton kernel.")
        self.rule = rule  # op_rules.OpRule: which recorded PyTorch ops this problem's call may make
        self.checked = None  # the input shapes the rule last passed the record for
        self.rec = rec
        self.device = device
        self.interpreted = not str(device).startswith("cuda")
        self.kernels = Kernels(rec, folder, self.interpreted)
        launches = [e for e in rec["events"] if e["op"] == "launch"]
        for e in launches:  # build every kernel now: a bad one is refused before anything runs
            kernel = self.kernels.get(e["kernel"])
            why = None if self.interpreted else scratch_problem(kernel.metadata, e["grid"])
            if why:
                raise ReplayError(f"A recorded kernel cannot be replayed: {why}.")
        if self.interpreted:
            self.kernels.check_compiles(launches)
        self.allowed_bytes: int | None = None  # set by the first run, from its inputs
        self.timed_buffers: dict | None = None  # buffer index -> its memory for timed runs (poison)
        self.guards: list = []  # the last run's allocations (Guarded), for guard checks and memory
        self.bases: list = []
        self.copied = 0  # elements the last run's copy events read (a read counter adds them)

    # -- buffers and views
    def _allocate(self, inputs: list, guarded: bool) -> list:
        bases, self.guards = [], []
        for b in self.rec["buffers"]:
            if b["kind"] == OP:  # filled in by the op that makes it
                bases.append(None)
                continue
            if b["kind"] == INPUT:
                t = inputs[b["index"]]  # the whole buffer the input view starts at (offset 0 of it)
                if not isinstance(t, torch.Tensor):
                    raise ReplayError("The record points into an input that is not a tensor.")
                bases.append(t)
                continue
            dt = dtype_of(b["dtype"])
            if guarded:
                g = Guarded(b["shape"], dt, self.device, strides=b["strides"])
                if b["fill"] == "zero":
                    g.view.zero_()
                self.guards.append(g)
                bases.append(g.base)
            elif self.timed_buffers is not None:  # a timed run: the buffers poison() filled before it
                t = self.timed_buffers[len(bases)]
                if b["fill"] == "zero":
                    t.zero_()  # inside the timed call, as the learner's torch.zeros was
                bases.append(t)
            else:  # a warm-up or back-to-back run: as a plain torch.empty (or zeros)
                n = span_of(b["shape"], b["strides"])
                t = (torch.zeros if b["fill"] == "zero" else torch.empty)(n, dtype=dt, device=self.device)
                bases.append(t)
        return bases

    def poison(self) -> None:
        """Before a timed run, outside its timing: every buffer the record allocates is filled with all-ones
        bytes (NaN in every float dtype, -1 in the integers), so nothing a kernel left in its own memory on the
        last run survives into this one. Without it, the allocator handed each timed replay the same blocks, and a
        kernel that kept its answers in scratch and copied them when the inputs' fingerprint matched read 0.98x
        cuBLAS where computing every tile read 0.77x (H200, 2026-11-28)."""
        if self.timed_buffers is None:
            self.timed_buffers = {}
            for i, b in enumerate(self.rec["buffers"]):
                if b["kind"] == ALLOC:
                    dt = dtype_of(b["dtype"])
                    size = torch.empty((), dtype=dt).element_size()
                    raw = torch.empty(span_of(b["shape"], b["strides"]) * size, dtype=torch.uint8, device=self.device)
                    self.timed_buffers[i] = raw.view(dt)
        for t in self.timed_buffers.values():
            t.view(torch.uint8).fill_(255)

    @staticmethod
    def _base(bases: list, buf) -> torch.Tensor:
        """Buffer ``buf`` of this run, once something (the allocation, or the op that returns it) made it."""
        if not (isinstance(buf, int) and 0 <= buf < len(bases)) or bases[buf] is None:
            raise ReplayError("The record uses a buffer before anything made it.")
        return bases[buf]

    def _view(self, bases: list, v: dict) -> torch.Tensor:
        base = self._base(bases, v.get("buf"))
        dt = dtype_of(v["dtype"])
        size = torch.empty((), dtype=dt).element_size()
        start = base.data_ptr() - base.untyped_storage().data_ptr()
        off = v["offset"] + start
        if off % size:
            raise ReplayError("The record has a tensor at an offset its dtype cannot start at.")
        span = span_of(v["shape"], v["strides"]) * size
        if off < 0 or off + span > base.untyped_storage().nbytes() or any(s < 0 for s in v["strides"]):
            raise ReplayError("The record has a tensor outside its buffer.")
        t = torch.empty(0, dtype=dt, device=base.device)
        t.set_(base.untyped_storage(), off // size, tuple(v["shape"]), tuple(v["strides"]))
        return t

    def _pointer(self, bases: list, arg: dict, for_interpreter: bool):
        buf, off = arg["ptr"]
        base = self._base(bases, buf)
        if not 0 <= off <= base.untyped_storage().nbytes() - (base.data_ptr() - base.untyped_storage().data_ptr()):
            raise ReplayError("The record has a pointer outside its buffer.")
        if not for_interpreter:
            ptr = base.data_ptr() + off
            if arg.get("a16") and ptr % 16:
                raise ReplayError("A kernel compiled for 16-byte aligned pointers would get an unaligned one here.")
            return ptr
        dt = dtype_of(arg.get("dtype") or "uint8")
        size = torch.empty((), dtype=dt).element_size()
        start = base.data_ptr() - base.untyped_storage().data_ptr() + off
        t = torch.empty(0, dtype=dt, device=base.device)
        n = max(0, (base.untyped_storage().nbytes() - start) // size)
        t.set_(base.untyped_storage(), start // size, (n,), (1,))
        return t

    @staticmethod
    def _value(arg: dict):
        if "value" in arg:
            return arg["value"]
        if "const" in arg:
            return constant_from_json(arg["const"])
        return None

    def _decode(self, bases: list, a):
        """An op argument from the record (record.Recording._encode) as the judge's own object."""
        if not isinstance(a, dict) or len(a) != 1:
            raise ReplayError("The record has an op argument the judge cannot read.")
        (kind, v), = a.items()
        if kind == "t":
            return self._view(bases, v)
        if kind == "v" and (v is None or isinstance(v, (bool, int, float, str))):
            return v
        if kind == "l" and isinstance(v, list):
            return [self._decode(bases, x) for x in v]
        if kind == "d" and isinstance(v, dict):
            return {str(k): self._decode(bases, x) for k, x in v.items()}
        if kind == "dtype":
            return dtype_of(v)
        if kind == "device":
            return torch.device(self.device)
        if kind == "torch" and isinstance(getattr(torch, str(v), None), (torch.memory_format, torch.layout)):
            return getattr(torch, v)
        raise ReplayError("The record has an op argument the judge cannot read.")

    def _op(self, bases: list, e: dict) -> None:
        """One recorded PyTorch op, done by the judge: its rule said beforehand that the op may be made."""
        func = self.rule.op(e.get("name", ""))
        args = self._decode(bases, {"l": e.get("args", {}).get("l", [])})
        kwargs = self._decode(bases, {"d": e.get("kwargs", {}).get("d", {})})
        out = func(*args, **kwargs)
        results = out if isinstance(out, (tuple, list)) else (out,)
        if len(results) != len(e.get("out", [])):
            raise ReplayError(f"{e['name']} returned other results in the replay than in the record.")
        for t, o in zip(results, e["out"]):
            if o is None:
                continue
            v = o.get("view", {})
            if not isinstance(t, torch.Tensor) or list(t.shape) != v.get("shape") or dtype_name(t.dtype) != v.get("dtype"):
                raise ReplayError(f"{e['name']} returned other results in the replay than in the record.")
            if "new" in o:
                if list(t.stride()) != v.get("strides") or t.storage_offset() * t.element_size() != v.get("offset"):
                    raise ReplayError(f"{e['name']} returned another layout in the replay than in the record.")
                buf = o["new"]
                if not (isinstance(buf, int) and 0 <= buf < len(bases)) or bases[buf] is not None \
                        or self.rec["buffers"][buf]["kind"] != OP:
                    raise ReplayError("The record makes one buffer twice.")
                bases[buf] = whole_storage(t)
            dst = self._view(bases, v)
            if dst.data_ptr() != t.data_ptr() or dst.stride() != t.stride():
                dst.copy_(t)

    # -- running
    def run(self, inputs: list, guarded: bool = True, shaped: list | None = None) -> tuple:
        """Do the recorded call on ``inputs`` (each a whole buffer; ``shaped``: the same as the call takes them,
        for the op rule's budget, where they differ); returns the output views (in the judge's buffers)."""
        if self.rule is not None:
            given = shaped if shaped is not None else inputs
            shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else t for t in given]
            if shapes != self.checked:  # once per set of shapes: a timed replay runs many times on one
                self.rule.check(self.rec, given)
                self.checked = shapes
        if self.allowed_bytes is None:  # what it may allocate, from its first inputs: before anything is made
            given = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
            self.allowed_bytes = max(MIN_ALLOC_BOUND, ALLOC_PER_INPUT_BYTE * given)
            if self.alloc_bytes() > self.allowed_bytes:
                raise ReplayError(f"The call allocated {self.alloc_bytes() / 2**30:.1f} GiB for "
                                  f"{given / 2**20:.1f} MiB of inputs, more than any problem here needs.")
        bases = self._allocate(inputs, guarded)
        self.bases = bases
        self.copied = 0
        stream = None
        if not self.interpreted:
            from .compat import ensure_triton_allocator
            ensure_triton_allocator()  # a kernel that builds TMA descriptors asks for scratch memory at launch
            stream = torch.cuda.current_stream().cuda_stream
        for e in self.rec["events"]:
            op = e["op"]
            if op == "launch":
                kernel = self.kernels.get(e["kernel"])
                if self.interpreted:
                    kwargs = {name: (self._pointer(bases, a, True) if "ptr" in a else self._value(a))
                              for name, a in e["args"]}
                    kernel[tuple(e["grid"])](**kwargs)
                else:
                    args = [self._pointer(bases, a, False) if "ptr" in a else self._value(a) for a in e["args"]]
                    gx, gy, gz = e["grid"]
                    if gx * gy * gz == 0:
                        continue
                    launcher = kernel.run
                    launcher(gx, gy, gz, stream, kernel.function, kernel.packed_metadata, None, None, None, *args)
            elif op == "zero":
                self._view(bases, e["view"]).zero_()
            elif op == "fill":
                self._view(bases, e["view"]).fill_(float(e["value"]))
            elif op == "copy":
                src = self._view(bases, e["src"])
                self._view(bases, e["dst"]).copy_(src)
                self.copied += src.numel()
            elif op == "aten":  # only with a rule (__init__)
                self._op(bases, e)
            else:
                raise ReplayError(f"The record has an operation the judge does not do ({op!r}).")
        return tuple(self._view(bases, v) for v in self.rec["outputs"])

    def alloc_bytes(self) -> int:
        return sum(span_of(b["shape"], b["strides"]) * torch.empty((), dtype=dtype_of(b["dtype"])).element_size()
                   for b in self.rec["buffers"] if b["kind"] == ALLOC)

    def output_buffers(self) -> set:
        return {v["buf"] for v in self.rec["outputs"]}

    def output_kinds(self) -> list:
        return [self.rec["buffers"][v["buf"]]["kind"] for v in self.rec["outputs"]]

    def extra_bytes(self) -> int:
        """Bytes allocated by the call besides what it returned: whole buffers it did not return, and the part
        of a returned buffer that no returned view covers (scratch held in the tail of the output's allocation)."""
        total = 0
        for i, b in enumerate(self.rec["buffers"]):
            if b["kind"] != ALLOC:
                continue
            size = span_of(b["shape"], b["strides"]) * torch.empty((), dtype=dtype_of(b["dtype"])).element_size()
            covered = sum(span_of(v["shape"], v["strides"]) * torch.empty((), dtype=dtype_of(v["dtype"])).element_size()
                          for v in self.rec["outputs"] if v["buf"] == i)
            total += max(0, size - covered)
        return total

    def guards_intact(self) -> bool:
        return all(g.guard_intact() for g in self.guards)

    def first_output_guard_hit(self) -> int | None:
        allocs = [i for i, b in enumerate(self.rec["buffers"]) if b["kind"] == ALLOC]
        outs = self.output_buffers()
        for i, g in zip(allocs, self.guards):
            if i in outs:
                hit = g.first_guard_hit()
                if hit is not None:
                    return hit
        return None


__all__ = ["Replay", "ReplayError", "metadata_problem", "validate"]
