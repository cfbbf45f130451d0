"""GPU-or-interpreter is decided before triton is imported, and the wrong order is a clear error."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _py(code):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "autograder")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_import_sets_interpreter_before_triton_and_prints_fingerprint():
    r = _py("import sys, os; import kernellab as kl; assert 'triton' in sys.modules;"
            "print(os.environ['TRITON_INTERPRET']); kl.setup()")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "1"
    assert "Triton interpreter" in out[1] and "torch" in out[1] and "triton" in out[1]
    assert out[2].startswith("can: correctness checks only | cannot: ") and "bf16" in out[2] and "TMA" in out[2]


def test_triton_imported_first_without_gpu_is_a_clear_error():
    r = _py("import triton\nimport kernellab")
    assert r.returncode != 0
    assert "Restart the kernel" in r.stderr and "setup cell" in r.stderr


def test_interpret_already_requested_is_fine():
    r = _py("import os; os.environ['TRITON_INTERPRET'] = '1'\nimport triton\nimport kernellab\nprint('ok')")
    assert r.returncode == 0 and "ok" in r.stdout
