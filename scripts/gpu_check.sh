#!/usr/bin/env bash
# GPU check: engine vs bare PyTorch loop, one worker pinned per GPU (see scripts/gpu_check.py).
#
#   scripts/gpu_check.sh                    # every visible NVIDIA GPU, wav2vec2-large (random weights)
#   scripts/gpu_check.sh --device cpu --quick   # the same logic on CPU with a tiny model (seconds)
#   scripts/gpu_check.sh --runner auto      # use the Ray engine too when ray is importable
#
# Needs only Python with numpy, torch, transformers and pyarrow; the project is used from this
# checkout (PYTHONPATH), nothing is installed or downloaded. A hard limit keeps it under 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ] && .venv/bin/python -c 'import torch, transformers' 2>/dev/null; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
echo "gpu_check.sh: $(date -u +%FT%TZ), python: $PY, repo: $PWD"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv || echo "nvidia-smi: not available"
exec timeout --kill-after=10 470 "$PY" scripts/gpu_check.py "$@"
