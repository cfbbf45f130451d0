"""Compile the Gluon attention kernel for sm_90 on a machine without a GPU (ptxas ships in Triton's wheel), and print
each configuration's registers, spills and shared memory. Nothing runs.

Gluon's API moves between Triton releases (3.9 renamed the TMA copies), so this needs triton 3.6.0, the GPU
machines' version, e.g. in a venv of its own:

    python3 -m venv /tmp/t36 && /tmp/t36/bin/pip install triton==3.6.0 torch==2.13.0 numpy
    /tmp/t36/bin/python scripts/gluon_attention/compile_check.py
"""
import itertools
import pathlib
import re
import subprocess
import sys
import tempfile

import torch
from triton.backends.compiler import GPUTarget
from triton.runtime import driver


class _NoGpu:
    """Just enough of a driver for JITFunction.warmup to compile for an H100."""

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0


driver.set_active(_NoGpu())
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import fa3_gluon as F  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402


def compile_one(D, block_n, stages, causal, pipe, regs, **kw):
    N, BH = 1024, 2
    q = torch.empty(BH * N, D, dtype=torch.float16)
    o = torch.empty_like(q)
    lse = torch.empty(BH * N, dtype=torch.float32)
    q_desc = TensorDescriptor.from_tensor(q, [64, D], gl.NVMMASharedLayout.get_default_for([64, D], gl.float16))
    kv_layout = gl.NVMMASharedLayout.get_default_for([block_n, D], gl.float16)
    k_desc = TensorDescriptor.from_tensor(q, [block_n, D], kv_layout)
    return F.attention_fwd_kernel.warmup(q_desc, k_desc, k_desc, o, lse, N, BH, 0.1, HEAD_D=D, BLOCK_N=block_n,
                                         STAGES=stages, CAUSAL=causal, LPT=causal, PIPE=pipe, CONSUMER_REGS=regs, num_warps=4,
                                         grid=(1,), **kw)


def ptxas_report(ptx: str) -> str:
    """ptxas's own count of registers and spill bytes for the kernel."""
    ptxas = pathlib.Path(sys.modules["triton"].__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as d:
        src = pathlib.Path(d) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([str(ptxas), "-v", "--gpu-name=sm_90a", str(src), "-o", str(src.with_suffix(".o"))],
                             capture_output=True, text=True)
    regs = re.findall(r"Used (\d+) registers", out.stderr)
    spills = re.findall(r"(\d+) bytes spill stores", out.stderr)
    return f"ptxas: {regs} registers, {spills} bytes spilled" + (f" ({out.stderr[-300:]})" if out.returncode else "")


if __name__ == "__main__":
    failed = 0
    for D, bn, st, causal, pipe in itertools.product((64, 128), (64, 128), (2,), (False, True), (False, True)):
        try:
            k = compile_one(D, bn, st, causal, pipe, 232)
            ptx = k.asm["ptx"]
            nreg = sorted(set(re.findall(r"setmaxnreg[.a-z0-9]* (\d+)", ptx)))
            print(f"D={D} BN={bn} S={st} causal={causal} pipe={pipe}: smem {k.metadata.shared} "
                  f"wgmma {ptx.count('wgmma.mma_async')} setmaxnreg {nreg} {ptxas_report(ptx)}")
        except Exception as e:  # report every configuration, not only the first failure
            failed += 1
            print(f"D={D} BN={bn} S={st} causal={causal} pipe={pipe}: {type(e).__name__}: {str(e)[:1500]}")
    for D, bn, st, pipe in ((128, 128, 2, False), (128, 64, 4, True), (64, 128, 3, True)):
        for causal in (False, True):
            k = compile_one(D, bn, st, causal, pipe, 232, STAGGER=True)
            print(f"D={D} BN={bn} S={st} causal={causal} pipe={pipe} stagger: {ptxas_report(k.asm['ptx'])}")
    for D, bn, st in ((128, 128, 2), (64, 128, 3), (128, 64, 3)):
        for causal in (False, True):
            k = compile_one(D, bn, st, causal, True, 232, PINGPONG=True)
            print(f"D={D} BN={bn} S={st} causal={causal} pipe pingpong: {ptxas_report(k.asm['ptx'])}")
    for cap in (104, 128):  # two programs per SM at D = 64
        k = compile_one(64, 64, 2, False, True, 232, maxnreg=cap)
        print(f"D=64 BN=64 pipe maxnreg={cap}: smem {k.metadata.shared} {ptxas_report(k.asm['ptx'])}")
    sys.exit(1 if failed else 0)
