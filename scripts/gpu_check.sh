#!/usr/bin/env bash
# The GPU check (scripts/gpu_check.py): on one GPU, in under 5 minutes, every model on cuda against the CPU,
# every algorithm on 4 processes with CUDA tensors and gloo against one process, NCCL where there are two GPUs
# or more, and GCN, SAGE and GAT against PyG's layers; one JSON file. Without CUDA the GPU sections read
# "skipped: no cuda". Usage: bash scripts/gpu_check.sh [OUT.json] [more flags of gpu_check.py]
set -euo pipefail
out=gpu_check.json
if [[ $# -gt 0 && $1 != -* ]]; then out="$1"; shift; fi
folder="$(dirname "$out")"
[[ -d $folder ]] || { echo "gpu_check.sh: error: folder '$folder' of '$out' does not exist" >&2; exit 2; }
out="$(cd "$folder" && pwd)/$(basename "$out")"  # relative to where it was called from
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
timeout 290 python scripts/gpu_check.py --out "$out" "$@"
