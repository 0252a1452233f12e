#!/bin/bash
# Does a refactor change any number a run reports? Trains fixed configurations (every algorithm, every model,
# dense and sparse communication, cached panels, every wire precision, with and without overlap) on Cora
# from two trees and compares their metrics files with benchmarks/same_metrics.py (times, memory figures and
# paths ignored; losses, accuracies and every byte and call per rank and phase compared exactly).
#
#   git worktree add /tmp/before <commit>
#   bash results/spmm_plan/equivalence.sh /tmp/before "$PWD" OUT_DIR [DATA_ROOT]
set -u
BEFORE=$1; AFTER=$2; OUT=$3; DATA=${4:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/datasets}
CONFIGS=(
  "a15|--nprocs 4 --algo 1.5d --replication 2 --model gcn --comm dense"
  "a1int8|--nprocs 4 --algo 1d --model gin --comm dense --comm-precision int8"
  "b2bf16|--nprocs 4 --algo 2d --model gcn --comm dense --comm-precision bf16"
  "b2gatc|--nprocs 4 --algo 2d --grid 2x2 --model gat --comm dense --cache-panels"
  "b2sp|--nprocs 4 --algo 2d --grid 1x4 --model sage --comm sparse --no-overlap"
  "c3c|--nprocs 4 --algo 3d --grid 2x2x1 --model sage --comm dense --cache-panels"
  "c3fp16|--nprocs 8 --algo 3d --grid 2x2x2 --model gcn --comm dense --comm-precision fp16"
  "c3sp|--nprocs 8 --algo 3d --grid 2x2x2 --model gin --comm sparse"
  "c3gat|--nprocs 8 --algo 3d --grid 2x2x2 --model gat --comm dense"
  "c15int8|--nprocs 4 --algo 1.5d --replication 2 --model sage --comm dense --comm-precision int8"
  "g15|--nprocs 4 --algo 1.5d --replication 2 --model gat --comm dense"
  "g1bf|--nprocs 4 --algo 1d --model gat --comm dense --comm-precision bf16"
  "g2int8|--nprocs 4 --algo 2d --grid 2x2 --model gat --comm dense --comm-precision int8 --no-overlap"
)
status=0
for tree in "$BEFORE" "$AFTER"; do
  side=$([ "$tree" = "$BEFORE" ] && echo before || echo after)
  mkdir -p "$OUT/$side"
  for entry in "${CONFIGS[@]}"; do
    name=${entry%%|*}; flags=${entry#*|}
    (cd "$tree" && PYTHONPATH="$tree" python -m gridgnn train --dataset cora --data-root "$DATA" --epochs 3 \
       --threads 1 --quiet --reorder none $flags --metrics-out "$OUT/$side/$name.json") || { echo "FAIL $side $name"; status=1; }
  done
done
for entry in "${CONFIGS[@]}"; do
  name=${entry%%|*}
  python "$(dirname "$0")/../../benchmarks/same_metrics.py" "$OUT/before/$name.json" "$OUT/after/$name.json" || status=1
done
exit $status
