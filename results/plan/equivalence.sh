#!/bin/bash
# BEFORE, AFTER: checkouts (git worktree) of the two commits; run from the repository root
# usage: BEFORE=/tmp/wt-before AFTER=/tmp/wt-after bash results/plan/equivalence.sh
cd "$(git rev-parse --show-toplevel)"; DATA_ROOT=${DATA_ROOT:-$PWD/../shared/datasets}
mkdir -p /tmp/eq/before /tmp/eq/after
CSBM="csbm:nodes=300,classes=5,features=13"
run() { name=$1; shift
  for side in before after; do
    tree=$AFTER; [ $side = before ] && tree=$BEFORE
    (cd $tree && PYTHONPATH=$tree python -c "import gridgnn,sys; assert gridgnn.__file__.startswith('$tree'), gridgnn.__file__" && \
     PYTHONPATH=$tree python -m gridgnn train --data-root $DATA_ROOT --threads 1 --epochs 5 "$@" \
      --metrics-out /tmp/eq/$side/$name.json > /tmp/eq/$side/$name.log 2>&1) || echo "FAIL $side $name"
  done
  echo "$name: $(python benchmarks/same_metrics.py /tmp/eq/before/$name.json /tmp/eq/after/$name.json 2>&1 | tail -1)"
}
run cora-1d --dataset cora --nprocs 4 --algo 1d
run cora-15d --dataset cora --nprocs 4 --algo 1.5d --replication 2
run cora-2d --dataset cora --nprocs 4 --algo 2d
run cora-2d-sparse --dataset cora --nprocs 4 --algo 2d --comm sparse --reorder metis
run cora-3d --dataset cora --nprocs 4 --algo 3d --grid 2x2x1
run cora-gat-2d --dataset cora --nprocs 4 --algo 2d --model gat --heads 2
run csbm-3d-222 --dataset $CSBM --directed --nprocs 8 --algo 3d --grid 2x2x2
run csbm-2d-23 --dataset $CSBM --directed --nprocs 6 --algo 2d --grid 2x3 --model sage
run csbm-15d-sparse --dataset $CSBM --directed --nprocs 6 --algo 1.5d --replication 3 --comm sparse --model gin
run csbm-3d-gat --dataset $CSBM --directed --nprocs 8 --algo 3d --grid 2x2x2 --model gat --heads 2 --attn-dropout 0.3
run cora-1d-sparse-metis --dataset cora --nprocs 4 --algo 1d --comm sparse --reorder metis
run csbm-2d-gat-32 --dataset $CSBM --directed --nprocs 6 --algo 2d --grid 3x2 --model gat --heads 3
