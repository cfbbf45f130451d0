"""Autotuning that also works in the CPU interpreter, and what each configuration costs in shared memory."""
from __future__ import annotations

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
    bm, bn = kw["BLOCK_M"], kw["BLOCK_N"]
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
        print(f"{kw['BLOCK_M']:>7} {kw['BLOCK_N']:>7} {kw.get('BLOCK_K', '-'):>7} {c.num_stages:>6} {c.num_warps:>5} "
              f"{kb:>9.0f}  {'yes' if fits else 'no: skipped there (OutOfResources)'}")
        rows.append({"config": str(c), "shared_kb": kb, "fits_t4": fits})
    if not any(r["fits_t4"] for r in rows):
        print("No configuration fits 64 KB: on a T4 autotuning would find nothing that runs. Add a small one.")
    return rows


def rotate_configs() -> bool:
    """For a correctness check (the grade of record's correctness worker): an autotuned kernel benchmarks
    nothing. Each new autotuning key (a new shape) takes the next of its configurations, in turn, among those
    the kernel's own pruning keeps, so that over several shapes every configuration is run and checked, at
    the cost of one compile per shape instead of compiling and timing every configuration at every shape
    (a 16-configuration matmul over 11 shapes: 11 compiles, not 176 compiles and benchmarks). Which
    configuration is fastest matters only where speed is graded, and there the autotuner runs as written.
    Results are never written to Triton's on-disk autotuning cache. Applies to this process for good;
    returns False where there is no autotuner to patch."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    if getattr(Autotuner._bench, "_kernellab_rotate", False):
        return True
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
