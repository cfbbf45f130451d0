"""Grading processes forked from a warm zygote (grading/processes/zygote.py) are what fresh ones would be: the job's
environment, folder, log and exit code; no secret in reach, not even in the environment block the zygote was
started with; killed with their group; gone when the zygote stops; and a zygote killed from outside is replaced."""
from __future__ import annotations

import json
import os
import pathlib
import time

import pytest

from kernellab.grading.judge import harness
from kernellab.grading.processes import zygote
from procs import alive, gone

PROBE = '''
import json, os, sys, time
mode = sys.argv[1]
if mode == "sleep":
    time.sleep(60)
if mode == "daemon":  # a double-forked daemon in a session of its own writes its pid, then the fork exits
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            with open(sys.argv[2] + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(sys.argv[2] + ".tmp", sys.argv[2])
            time.sleep(60)
        os._exit(0)
    os.waitpid(first, 0)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
    sys.exit(0)
with open("/proc/self/environ", "rb") as f:
    initial = f.read().decode(errors="replace")
try:
    open(f"/proc/{os.getppid()}/mem", "rb").close()
    mem = "opened"
except OSError as exc:
    mem = type(exc).__name__
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ), "initial_env": initial,
                  "ppid": os.getppid(), "zygote_mem": mem, "torch_loaded": "torch" in sys.modules,
                  "dynamo_loaded": "torch._dynamo" in sys.modules,
                  "zygote_threads": len(os.listdir(f"/proc/{os.getppid()}/task"))}))
sys.exit(int(sys.argv[2]) if len(sys.argv) > 3 else 0)
'''

pytestmark = pytest.mark.skipif(not zygote.enabled(), reason="forking grading processes needs Linux")


@pytest.fixture
def probe_env(tmp_path, monkeypatch):
    (tmp_path / "kl_probe.py").write_text(PROBE)
    monkeypatch.setenv("KERNELLAB_SECRET", "do-not-leak")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    env = harness._child_env()
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"  # a zygote of its own, that finds the probe
    yield env, tmp_path
    zygote.stop_all()


def _fork(env, tmp_path, *args, name="job", **extra):
    job = tmp_path / name
    job.mkdir()
    proc = zygote.spawn("kl_probe", list(args), {**env, **extra}, job, job / "log", full=True)
    assert proc is not None, "the zygote gave no process"
    return proc, job


def test_a_fork_runs_with_the_jobs_environment_folder_log_and_exit_code(probe_env):
    env, tmp = probe_env
    proc, job = _fork(env, tmp, "report", "3", name="a", CUDA_VISIBLE_DEVICES="7",
                      TORCHINDUCTOR_CACHE_DIR=str(tmp / "a-inductor"))
    assert proc.wait(60) == 3
    seen = json.loads((job / "log").read_text().strip().splitlines()[-1])
    assert seen["argv"][:2] == ["report", "3"] and pathlib.Path(seen["cwd"]) == job
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "7"  # per job, not the zygote's
    # Inductor's cache too: the job's own, never one the zygote's imports made (a folder every fork would share)
    assert seen["env"]["TORCHINDUCTOR_CACHE_DIR"] == str(tmp / "a-inductor")
    assert seen["torch_loaded"]  # imported once, by the zygote
    # so is what a process's first dispatch mode imports (every recording worker enters one), and the zygote
    # still runs one thread only (a fork copies only the thread that forks: another's locks would stay held)
    assert seen["dynamo_loaded"] and seen["zygote_threads"] == 1
    # No secret and no grading marker: not in the job's environment, nor in the block the zygote started with.
    for text in (json.dumps(seen["env"]), seen["initial_env"]):
        assert "do-not-leak" not in text and "NBGRADER_EXECUTION" not in text
    if os.geteuid() != 0:  # root may read any process's memory; anyone else may not read the zygote's
        assert seen["zygote_mem"] != "opened"
    # A second job forks from the same warm zygote; a job of another environment gets one of its own.
    proc2, job2 = _fork(env, tmp, "report", name="b")
    assert proc2.wait(60) == 0
    second = json.loads((job2 / "log").read_text().strip().splitlines()[-1])
    # (a job told no Inductor cache keeps what its environment said, never the folder the zygote's imports used)
    assert second["ppid"] == seen["ppid"]
    assert second["env"].get("TORCHINDUCTOR_CACHE_DIR") == env.get("TORCHINDUCTOR_CACHE_DIR")
    assert not list(pathlib.Path(zygote._LOG_DIR[0]).glob("*-inductor"))  # gone before any fork
    # Another environment, another zygote. This one, like a judge counting reads on a GPU machine, is told to
    # interpret kernels but not how: kernellab's import in the zygote sets TRITON_INTERPRET, and the fork, whose
    # Triton was imported under it, keeps it.
    other = {k: v for k, v in env.items() if k != "TRITON_INTERPRET"} | {"KERNELLAB_FORCE_CPU": "1"}
    proc3, job3 = _fork(other, tmp, "report", name="c")
    assert proc3.wait(60) == 0
    third = json.loads((job3 / "log").read_text().strip().splitlines()[-1])
    assert third["ppid"] != seen["ppid"] and third["env"].get("TRITON_INTERPRET") == "1"


def test_forks_are_killed_with_their_group_and_die_with_the_zygote_which_is_replaced(probe_env):
    env, tmp = probe_env
    proc, _ = _fork(env, tmp, "sleep", name="a")
    time.sleep(0.5)
    assert proc.poll() is None
    zygote.kill_group(proc)  # what a budget does: the fork's whole group
    assert proc.returncode == -9
    sleeper, _ = _fork(env, tmp, "sleep", name="b")
    key = next(k for k, z in zygote._ZYGOTES.items() if z.proc is not None and z.proc.poll() is None
               and any(kv[0] == "PYTHONPATH" and str(tmp) in kv[1] for kv in k[1]))
    first = zygote._ZYGOTES[key]
    os.kill(first.proc.pid, 9)  # killed from outside: its forks go with it, and the next job gets a new zygote
    assert gone(sleeper.pid) and sleeper.wait(10) == -9
    proc, job = _fork(env, tmp, "report", name="c")
    assert proc.wait(60) == 0 and zygote._ZYGOTES[key] is not first
    last = zygote._ZYGOTES[key].proc.pid
    zygote.stop_all()
    assert gone(last) and not zygote._ZYGOTES


def test_a_daemon_a_fork_leaves_behind_is_killed_before_the_forks_exit_is_reported(probe_env):
    """A worker's double-forked daemon (its own session: no group kill reaches it) is reparented to the zygote,
    its subreaper, which kills it: by the time the grader sees the worker end, nothing of it runs (a red-team
    daemon of 2026-11-27 waited there for the judge's inputs and wrote the judge's result)."""
    env, tmp = probe_env
    proc, job = _fork(env, tmp, "daemon", str(tmp / "daemon.pid"), name="d")
    assert proc.wait(60) == 0
    daemon = int((tmp / "daemon.pid").read_text())
    assert not alive(daemon), "the daemon outlived the fork's reported exit"


def test_a_gpu_zygote_whose_imports_touched_cuda_gives_no_forks_and_is_not_restarted(tmp_path):
    # The GPU zygote imports torch, Triton and what a first dispatch mode imports; should any of that ever
    # initialise CUDA (or make Triton pick its GPU driver), forks could not use the GPU: the zygote refuses, and
    # its environment's processes start fresh.
    from types import SimpleNamespace as NS
    torch_ok, torch_init = (NS(cuda=NS(is_initialized=lambda v=v: v)) for v in (False, True))
    assert zygote.cuda_touched(torch_ok, NS(_active=None, _default=None)) is None
    assert "torch" in zygote.cuda_touched(torch_init, NS(_active=None, _default=None))
    assert "Triton" in zygote.cuda_touched(torch_ok, NS(_active=None, _default=object()))
    assert "device_count" in zygote.cuda_touched(torch_ok, NS(_active=None, _default=None), ["device_count"])
    # the calls are noted while the warm-up runs, and torch is as it was after it
    import torch
    before = torch.cuda.device_count
    with zygote._noting_cuda_calls(torch):
        torch.cuda.device_count()
    assert zygote._CUDA_CALLS[-1:] == ["device_count"] and torch.cuda.device_count is before
    zygote._CUDA_CALLS.clear()
    # The GPU zygote's own imports, run here on the CPU: ready, nothing touched.
    env = harness._child_env()
    z = zygote.Zygote(env, False, str(tmp_path / "light.log"))
    try:
        with z._cond:
            z._cond.wait_for(lambda: z.ready or z.dead, 120)
        assert z.ready and z.refused is None, (tmp_path / "light.log").read_text()[-2000:]
    finally:
        z.stop()
    # One that refused is asked for no fork again, nor replaced.
    refused = zygote.Zygote.__new__(zygote.Zygote)
    refused.refused, refused.dead = "torch initialised CUDA", True
    key = zygote.key_for(env, False)
    with zygote._ZYGOTES_LOCK:
        zygote._ZYGOTES[key] = refused
    try:
        assert zygote.spawn("kl_probe", [], env, tmp_path, tmp_path / "log", full=False) is None
        assert zygote._ZYGOTES[key] is refused
    finally:
        with zygote._ZYGOTES_LOCK:
            zygote._ZYGOTES.pop(key, None)


def test_the_gpu_zygote_warms_what_every_worker_did_again(tmp_path):
    # Triton's cache key (a hash of its sources and compiler library), its gluon package and the interpreter
    # module, done once in the zygote so that forks inherit them: done here in a plain Python, as the GPU zygote
    # does, with no kernellab imported and nothing touching CUDA.
    import subprocess
    import sys
    code = (
        "import sys, torch, triton, triton.language\n"
        f"sys.path.insert(0, {str(pathlib.Path(zygote.__file__).parent)!r})\n"
        "import zygote\n"
        "from triton.runtime.cache import triton_key\n"
        "assert triton_key.cache_info().currsize == 0\n"
        "zygote._warm_triton()\n"
        "assert triton_key.cache_info().currsize == 1, triton_key.cache_info()\n"
        "assert 'triton.experimental.gluon' in sys.modules and 'triton.runtime.interpreter' in sys.modules\n"
        "assert not any(m.startswith('kernellab') for m in sys.modules)\n"
        "assert zygote.cuda_touched(torch, getattr(triton.runtime, 'driver', None)) is None\n"
        "print('warm')\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "warm" in out.stdout, out.stderr[-2000:]
