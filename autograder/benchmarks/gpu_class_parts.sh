#!/usr/bin/env bash
# On the offline GPU machine: install the class-grading wheels and grade parts of the synthetic class, one
# (mode, lesson) per part, each under its own time limit, into $OUT (autograder/benchmarks/class_grading.py --part).
#   here:  bash ../shared/tools/gpu-wheels.sh .whl ray, then .whlcls = .whl without nbgrader, ray, sqlalchemy,
#          rapidfuzz, widgetsnbextension, alembic and mako, plus ray_slim.zip (ray's wheel without jars, rllib,
#          data, serve, llm, tune, train and the dashboard's client build): under the 64 MiB a run carries
#   there: bash autograder/benchmarks/gpu_class_parts.sh queue:04_flash_attention:q04:240 ray_local:03_fused_softmax_layernorm:r03:260
# A fifth field sets variables for one part (queue_2gpu:03_fused_softmax_layernorm:t03:200:OMP_NUM_THREADS=1);
# JOBS=N there grades that part with --jobs N (queue_2gpu:03_fused_softmax_layernorm:j03:120:JOBS=18), PER=N a class
# of N submissions (--per-lesson), CPUS=0-15 on those cores only (taskset: one GPU with its half of the host's CPU),
# LOAD=N N more copies of the lesson's solution (--load-copies), QUIET=N its speed problems regraded N times with
# nothing else running, before the class (--quiet-regrades): speed under load.
# Modes queue_<N>gpu / ray_<N>gpu grade on N of the machine's GPUs (the two-GPU run: queue_1gpu beside queue_2gpu).
# A part's whole output is kept as $OUT/full-PART.txt (the log shows its last lines).
# Every part starts with an empty Triton cache of its own, so no mode grades with kernels an earlier part compiled.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whlcls/*.whl 2>&1 | grep -v WARNING | tail -2
python3 - <<'PY'
import zipfile; zipfile.ZipFile(".whlcls/ray_slim.zip").extractall("/tmp/site")
PY
find /tmp/site/ray/core -type f \( -name raylet -o -name gcs_server \) -exec chmod +x {} +
export PYTHONPATH=$PWD/autograder:/tmp/site PATH=/tmp/site/bin:$PATH KERNELLAB_CACHE=/tmp/klc
nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader; nvidia-smi topo -m 2>/dev/null | head -4
if [ -n "${KL_PYSPY:-}" ] && [ "${KL_PYSPY}" != 0 ] && ! py-spy record --nonblocking --format raw -o /tmp/pyspy-check.txt -- \
     python3 -c 'import time; time.sleep(0.5)' >/dev/null 2>&1; then
  echo "py-spy cannot sample here (ptrace refused?): parts run without it"; KL_PYSPY=0
fi
started=$(mktemp)  # this call's runs are the class folders made after it (a warm machine keeps earlier calls')
for spec in "$@"; do
  IFS=: read -r mode lesson part t vars <<<"$spec"  # vars (optional): KEY=V,KEY=V set for this part only
  jobs=(); [[ ",$vars," =~ ,JOBS=([0-9]+), ]] && jobs=(--jobs "${BASH_REMATCH[1]}")  # JOBS=N: --jobs N
  [[ ",$vars," =~ ,PER=([0-9]+), ]] && jobs+=(--per-lesson "${BASH_REMATCH[1]}")  # PER=N: N submissions
  [[ ",$vars," =~ ,LOAD=([0-9]+), ]] && jobs+=(--load-copies "${BASH_REMATCH[1]}")  # LOAD=N: N more solution copies
  [[ ",$vars," =~ ,QUIET=([0-9]+), ]] && jobs+=(--quiet-regrades "${BASH_REMATCH[1]}")  # QUIET=N: speed regraded N times first
  on=(); [[ ",$vars," =~ ,CPUS=([0-9-]+), ]] && on=(taskset -c "${BASH_REMATCH[1]}")  # CPUS=0-15: those cores only
  echo "== $spec $(date -u +%T)"
  export TRITON_CACHE_DIR=/tmp/triton-$part; rm -rf "$TRITON_CACHE_DIR"
  run=(python3 autograder/benchmarks/class_grading.py)
  # KL_PYSPY=1: sample the grading process (not its workers) while it holds the GIL, into $OUT/pyspy-PART.txt
  [ "${KL_PYSPY:-}" = 1 ] && run=(py-spy record --gil --nonblocking --rate 20 --format raw -o "$OUT/pyspy-$part.txt" -- "${run[@]}")
  # KL_PYSPY=all: every process of the run (workers and judges too, each stack under its process), on CPU or not;
  # autograder/benchmarks/pyspy_summary.py groups its samples by process kind and activity
  [ "${KL_PYSPY:-}" = all ] && run=(py-spy record --subprocesses --nonblocking --rate 50 --format raw -o "$OUT/pyspy-$part.txt" -- "${run[@]}")
  env ${vars//,/ } timeout -k 20 "$t" "${on[@]}" "${run[@]}" --modes "$mode" --lessons "$lesson" --part "$part" \
    --out "$OUT" --serial-per-lesson 1 "${jobs[@]}" 2>&1 | tee "$OUT/full-$part.txt" | grep -v "Warning\|^E11\|^W11\|py-spy> " | tail -12
  pkill -f raylet; pkill -f gcs_server; sleep 1
done
# every grading's record (holds, waits, logs' tails), for what the parts' summaries do not say
(cd /tmp && find . -maxdepth 1 -name 'kl-class-*' -newer "$started" -printf '%P\n' \
  | xargs -r -I{} find {} -maxdepth 1 -name 'logs-*' | tar czf "$OUT/records.tgz" --exclude='*.pt' -T - 2>/dev/null)
ls -la "$OUT"
