#!/usr/bin/env bash
# Set up (first time) and run the whole test suite on the CPU (Triton interpreter; no GPU needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# Two workers (pytest-xdist), each taking whole test files: a lesson's round trip shares one nbgrader course
# per file. KERNELLAB_TEST_WORKERS=0 runs everything in one process.
KERNELLAB_FORCE_CPU=1 .venv/bin/python -m pytest -n "${KERNELLAB_TEST_WORKERS:-2}" --dist loadfile \
  --ignore=tests/test_browser.py "$@"
# The browser tests last and alone: beside the corpus's grading processes on two cores, JupyterLab's kernel
# was starved long enough for a widget's redraw to miss its minute (CI, 2026-11-24).
KERNELLAB_FORCE_CPU=1 .venv/bin/python -m pytest tests/test_browser.py "$@"
