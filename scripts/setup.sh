#!/usr/bin/env bash
# Create .venv with torch first (CPU build unless a CUDA torch is already there), then the course.
#   bash scripts/setup.sh            an instructor's: the course and nbgrader (kernellab[instructor])
#   bash scripts/setup.sh learner    a learner's: the course and JupyterLab only (scripts/start.sh runs this)
#   bash scripts/setup.sh test       the test suite's: everything, Ray and Playwright too (scripts/test.sh runs this)
# KERNELLAB_PYTHON picks the interpreter (default python3, 3.11+); KERNELLAB_TORCH the torch spec.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-instructor}" in
  learner) extras=course ;;
  instructor) extras=instructor ;;
  test) extras=instructor,test ;;
  *) echo "usage: bash scripts/setup.sh [learner|instructor|test]" >&2; exit 2 ;;
esac
py=${KERNELLAB_PYTHON:-python3}
[ -x .venv/bin/python ] || "$py" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch goes in first and alone: each torch pins its own triton, and the project must not pull another.
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "${KERNELLAB_TORCH:-torch==2.13.0}"
.venv/bin/python -m pip install -q -e ".[$extras]"
.venv/bin/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (KernelLab)" >/dev/null
