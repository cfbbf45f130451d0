#!/usr/bin/env bash
# Set up (first time) and run the whole test suite on the CPU (Triton interpreter; no GPU needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
KERNELLAB_FORCE_CPU=1 .venv/bin/python -m pytest "$@"
