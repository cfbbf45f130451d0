#!/usr/bin/env bash
# Set up (first time) and open the course: JupyterLab on notebooks/.
# KERNELLAB_SMOKE=1 starts JupyterLab headless, checks that it serves a lesson, and stops it (used by CI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh learner  # no nbgrader, Ray or test tools in a learner's JupyterLab
export PATH="$PWD/.venv/bin:$PATH"
root_flag=()
[ "$(id -u)" = 0 ] && root_flag=(--allow-root)  # containers and CI machines often run as root
if [ "${KERNELLAB_SMOKE:-0}" != "1" ]; then
  exec jupyter lab notebooks/ "${root_flag[@]}"
fi
port=$(python -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
jupyter lab notebooks/ "${root_flag[@]}" --no-browser --ip=127.0.0.1 --port="$port" --IdentityProvider.token=smoke \
  --ServerApp.root_dir="$PWD/notebooks" > .venv/jupyterlab-smoke.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do
  if curl -sf "http://127.0.0.1:$port/api/contents/01_roofline_vector_add?token=smoke" >/dev/null; then
    curl -sf "http://127.0.0.1:$port/lab?token=smoke" | grep -q "JupyterLab" && echo "JupyterLab serves the course on port $port" && exit 0
  fi
  sleep 1
done
echo "JupyterLab did not come up; log:"; tail -30 .venv/jupyterlab-smoke.log; exit 1
