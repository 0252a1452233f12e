#!/bin/bash
# BEFORE, AFTER: checkouts (git worktree) of the two commits; run from the repository root
mkdir -p /tmp/pc/before /tmp/pc/after
cd "$(git rev-parse --show-toplevel)"; DATA_ROOT=${DATA_ROOT:-$PWD/../shared/datasets}
i=0
while read -r args; do
  i=$((i+1))
  for side in before after; do
    tree=$AFTER; [ $side = before ] && tree=$BEFORE
    (cd $tree && PYTHONPATH=$tree python -m gridgnn plan --data-root $DATA_ROOT $args --json > /tmp/pc/$side/$i.json 2>&1)
  done
  if cmp -s /tmp/pc/before/$i.json /tmp/pc/after/$i.json; then echo "identical: $args"; else echo "DIFFER: $args"; fi
done <<'CASES'
--dataset cora --nprocs 4 6 8 9 12 16
--dataset cora --model gat --heads 4 --nprocs 4 6 8 16
--dataset cora --model sage --comm sparse --nprocs 4 8 16
--dataset csbm:nodes=300,classes=5,features=13 --directed --model gin --comm auto --reorder metis --nprocs 4 6 8
--num-nodes 1000000 --num-edges 20000000 --num-features 128 --num-classes 16 --nprocs 64 256 4096
--num-nodes 200000 --num-edges 4000000 --num-features 64 --num-classes 8 --model gat --nprocs 16 64
CASES
