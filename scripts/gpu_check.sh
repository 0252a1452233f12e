#!/usr/bin/env bash
# Runs the distributed SpMM tests with NCCL on CUDA (one rank per GPU; world sizes above the GPU count are
# skipped), then a short CUDA training run when the trainer supports it. Usage: bash scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0), torch.cuda.device_count(), 'GPU(s)')"
GRIDGNN_TEST_DEVICE=cuda python -m pytest -q tests/test_spmm_distributed.py "$@"
