"""Autotuning that also works in the CPU interpreter, and what each configuration costs in shared memory."""
from __future__ import annotations

import contextlib

T4_SHARED_BYTES = 64 * 1024  # per block on sm_75; the smallest of the GPUs the course supports


def autotune(configs: list, key: list, **kwargs):
    """``triton.autotune``, kept under the course's name. The interpreter cannot benchmark (it has no
    driver): there every autotuned kernel, this one or a stock ``triton.autotune``, runs with its first
    configuration (compat.patch_interpreter_autotune), so put a small, portable one first."""
    import triton

    return triton.autotune(configs=configs, key=key, **kwargs)


def shared_bytes(config, elem_bytes: int = 2, head_dim: int = 128) -> int:
    """Shared memory a pipelined tile needs. Matmul (BLOCK_K in the config): one A tile and one B tile per
    stage. Attention (no BLOCK_K): the resident block of BLOCK_M rows plus, per stage, two streamed blocks
    of BLOCK_N rows (K and V), each ``head_dim`` wide - 128, the largest the course uses."""
    kw = config.kwargs
    # decode attention (lesson 09) names no BLOCK_M: its resident block is the 16 query rows tl.dot needs
    bm, bn = kw.get("BLOCK_M", 16), kw["BLOCK_N"]
    if "BLOCK_K" not in kw:
        return (bm * head_dim + max(1, config.num_stages) * 2 * bn * head_dim) * elem_bytes
    bk = kw["BLOCK_K"]
    return config.num_stages * (bm * bk + bk * bn) * elem_bytes


def show_configs(configs: list) -> list[dict]:
    """Print each configuration with its shared memory, and whether it fits a T4 (64 KB)."""
    rows = []
    print(f"{'BLOCK_M':>7} {'BLOCK_N':>7} {'BLOCK_K':>7} {'stages':>6} {'warps':>5} {'shared KB':>9}  fits a T4?")
    for c in configs:
        kb = shared_bytes(c) / 1024
        fits = shared_bytes(c) <= T4_SHARED_BYTES
        kw = c.kwargs
        print(f"{kw.get('BLOCK_M', '-'):>7} {kw['BLOCK_N']:>7} {kw.get('BLOCK_K', '-'):>7} {c.num_stages:>6} "
              f"{c.num_warps:>5} "
              f"{kb:>9.0f}  {'yes' if fits else 'no: skipped there (OutOfResources)'}")
        rows.append({"config": str(c), "shared_kb": kb, "fits_t4": fits})
    if not any(r["fits_t4"] for r in rows):
        print("No configuration fits 64 KB: on a T4 autotuning would find nothing that runs. Add a small one.")
    return rows


def _autotuner(marker: str) -> tuple:
    """(Triton's Autotuner class or None where there is none, whether it already carries the patch ``marker``)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return None, False
    return Autotuner, bool(getattr(Autotuner._bench, marker, False))


def rotate_configs() -> bool:
    """For a correctness check (the grade of record's correctness worker): an autotuned kernel benchmarks
    nothing. Each new autotuning key (a new shape) takes the next of its configurations, in turn, among those
    the kernel's own pruning keeps, so that over several shapes every configuration is run and checked, at
    the cost of one compile per shape instead of compiling and timing every configuration at every shape
    (a 16-configuration matmul over 11 shapes: 11 compiles, not 176 compiles and benchmarks). Which
    configuration is fastest matters only where speed is graded, and there the autotuner runs as written.
    Results are never written to Triton's on-disk autotuning cache. Applies to this process for good;
    returns False where there is no autotuner to patch."""
    Autotuner, done = _autotuner("_kernellab_rotate")
    if Autotuner is None or done:
        return done
    prune = Autotuner.prune_configs

    def prune_configs(self, *args, **kwargs):
        kept = prune(self, *args, **kwargs)
        turn = getattr(self, "_kl_turn", -1) + 1  # prune runs once per new key, just before the benchmarks
        self._kl_turn, self._kl_pick = turn, kept[turn % len(kept)] if kept else None
        self.cache_results = False  # a rotated pick is no timing: keep it off the disk cache
        return kept

    def _bench(self, *args, config, **kwargs):
        # The autotuner keeps the configuration with the smallest time: the one whose turn it is "wins".
        return [0.0, 0.0, 0.0] if config is getattr(self, "_kl_pick", None) else [1.0, 1.0, 1.0]
    _bench._kernellab_rotate = True
    Autotuner.prune_configs = prune_configs
    Autotuner._bench = _bench
    return True


_ABSENT = object()
_UNTIMED: list | None = None  # while compile_only() is on: the autotuners that picked a configuration untimed
_RESULTS: dict = {}  # while it is on: each autotuner's own cache_results, turned off meanwhile
_ROUNDS: int | None = None  # while in_rounds() is on: how many rounds each configuration is timed in


@contextlib.contextmanager
def compile_only():
    """For a speed problem's worker, which compiles beside other grading: inside the block an autotuner compiles
    and runs each configuration once and times none (whatever it would pick with the GPU shared is noise). Yields
    the list of autotuners that picked that way; on leaving, each forgets those picks, so that its next call
    (with the GPU alone: grading/worker/child.py) times every configuration, now compiled, and keeps the fastest.
    Nothing picked here reaches Triton's on-disk autotuning cache. Without Triton's autotuner: yields [] and
    changes nothing."""
    global _UNTIMED
    if not allow_compile_only():
        yield []
        return
    picked: list = []
    _UNTIMED = picked
    try:
        yield picked
    finally:
        _UNTIMED = None
        for tuner in picked:
            tuner.cache.clear()
        for tuner, own in _RESULTS.values():
            tuner.cache_results = own
        _RESULTS.clear()


def allow_compile_only() -> bool:
    """Patch Triton's autotuner for compile_only (a no-op outside it). A grading worker calls this before the
    integrity snapshot it takes ahead of learner code, to which any later change to the autotuner is tampering.
    Returns False where there is no autotuner to patch."""
    Autotuner, done = _autotuner("_kernellab_untimed")
    if Autotuner is None or done:
        return done
    prune, bench = Autotuner.prune_configs, Autotuner._bench
    from .timing import interleaved  # imported here, before the snapshot, for in_rounds

    def prune_configs(self, *args, **kwargs):  # once per new key, before the disk cache is looked at
        if _UNTIMED is not None:
            _RESULTS.setdefault(id(self), (self, self.cache_results))
            self.cache_results = False
        kept = prune(self, *args, **kwargs)
        self._kl_kept, self._kl_timed = list(kept), None  # the configurations this key's benchmark will time
        return kept

    def _bench(self, *args, config, **kwargs):
        if _UNTIMED is None:
            if _ROUNDS and _default_benchmarker(self) and config in getattr(self, "_kl_kept", ()):
                if self._kl_timed is None:  # this key's first benchmark call times them all, in rounds
                    self._kl_timed = _time_in_rounds(self, lambda c: bench(self, *args, config=c, **kwargs),
                                                     self._kl_kept, _ROUNDS, interleaved)
                return self._kl_timed[config]
            return bench(self, *args, config=config, **kwargs)
        if all(t is not self for t in _UNTIMED):
            _UNTIMED.append(self)
        with _benchmarker(self, _run_once):  # the original builds the call (hooks, meta-parameters); run, not timed
            return bench(self, *args, config=config, **kwargs)
    _bench._kernellab_untimed = True
    Autotuner.prune_configs, Autotuner._bench = prune_configs, _bench
    return True


@contextlib.contextmanager
def _benchmarker(tuner, fn):
    """The autotuner times with ``fn`` inside the block, then with its own again (set on it, or looked up anew)."""
    own = tuner.__dict__.get("do_bench", _ABSENT)
    tuner.do_bench = fn
    try:
        yield
    finally:
        if own is _ABSENT:
            tuner.__dict__.pop("do_bench", None)
        else:
            tuner.do_bench = own


def _run_once(kernel_call, quantiles=None, **_):
    kernel_call()
    return [1.0, 1.0, 1.0] if quantiles else 1.0


@contextlib.contextmanager
def in_rounds(rounds: int = 4):
    """For a speed problem's worker, once its autotuners' configurations are compiled (compile_only) and its GPU is
    its own: inside the block an autotuner that times with Triton's own benchmarker times its configurations in
    ``rounds`` rounds, each round every configuration once (``_round_bench``: a quarter of Triton's usual time),
    forwards then backwards in turn, and keeps the one with the least mean. Triton times each once, one after
    another, so whatever slows the GPU or its timer for a tenth of a second decides against the configuration timed
    then; back and forth, a steady drift costs every configuration alike, and a disturbed round counts a quarter. In
    a class graded on two H100s (2026-11-27), in each of three modes one of the five submissions timing lesson 02's
    solution matmul (three copies, two wrong only away from the timed shape) was graded with a configuration 7-14 %
    slower than the others'; in rounds, all five within 0.3 % (one run, one H100, the same day). On a quiet GPU,
    alone, Triton's own timing picked one configuration ten times in ten, 0.8 % slower than the one picked in rounds
    nine times in ten (assets/bench/autotune_rounds.md, removed in 2026-11-28's cleanup: git show 78392a5:assets/bench/autotune_rounds.md). An autotuner given its own ``do_bench`` keeps it. Needs
    allow_compile_only (the patch this rides on)."""
    global _ROUNDS
    _ROUNDS = max(2, int(rounds))
    try:
        yield
    finally:
        _ROUNDS = None


def _default_benchmarker(tuner) -> bool:
    """Whether the autotuner times with Triton's own benchmarker: none given (do_bench, warmup, rep or CUDA graphs),
    none set on it since, and the one it may have looked up already (cached on it) is triton.testing.do_bench."""
    if getattr(tuner, "_do_bench", None) is not None:
        return False
    cached = tuner.__dict__.get("do_bench", _ABSENT)
    if cached is _ABSENT:
        return True
    import triton.testing
    return cached is triton.testing.do_bench


def _round_bench(kernel_call, quantiles=None):
    """One round's timing of one configuration: triton.testing.do_bench for a quarter of its usual 25 + 100 ms."""
    import triton.testing
    return triton.testing.do_bench(kernel_call, warmup=6, rep=25, quantiles=quantiles)


def _time_in_rounds(tuner, bench, configs: list, rounds: int, interleaved) -> dict:
    """config -> [mean, fastest, slowest] of its per-round times, the rounds timing.interleaved's (back and forth).
    ``bench(config)``: the autotuner's own, which builds each call and gives a configuration that fails to compile
    an infinite time; such a one is not timed again."""
    import math
    failed = set()

    def timer(i: int) -> float:
        if i in failed:
            return math.inf
        t = bench(configs[i])
        t = float(t[0] if isinstance(t, (list, tuple)) else t)
        if math.isinf(t):
            failed.add(i)
        return t
    with _benchmarker(tuner, _round_bench):
        res = interleaved({i: i for i in range(len(configs))}, rounds, timer=timer)
    return {c: [sum(ts) / len(ts), min(ts), max(ts)] for c, ts in ((c, res[f"{i}_all"]) for i, c in enumerate(configs))}
