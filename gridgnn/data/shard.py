"""The bridge from a global `Graph` to one rank's node data (the adjacency is sharded by the SpMM).

Every algorithm's dense layout is a contiguous block of rows by a contiguous block of feature columns
(`gridgnn.spmm.base.DistributedSpMM.row_range` / ``col_range``); this module cuts the features, labels and
masks of the graph to that block once, before training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from gridgnn.data.graph import Graph
from gridgnn.data.targets import target_block


@dataclass
class LocalShard:
    """Node data of one rank.

    features: (rows, cols) float32, the block [r0:r1, c0:c1] of the global features, scipy CSR when the
    graph's features are sparse (bag-of-words stays sparse), else a dense tensor.
    labels: the rows' targets (`gridgnn.data.targets`): (rows,) int64 or (rows, T) float32.
    masks: train/val/test bool (rows,). mask_totals: global sizes of the three masks
    (the loss is a mean over *all* training vertices, whatever the layout).
    """

    features: torch.Tensor | sp.csr_matrix
    labels: torch.Tensor
    masks: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    mask_totals: tuple[int, int, int]


def shard_node_data(graph: Graph, row_range: tuple[int, int], col_range: tuple[int, int],
                    device: torch.device | str = "cpu") -> LocalShard:
    """This rank's block of the node data. Not collective."""
    (r0, r1), (c0, c1) = row_range, col_range
    block = graph.features[r0:r1, c0:c1]
    if sp.issparse(block):
        features = sp.csr_matrix(block, dtype=np.float32)
    else:
        dense = np.ascontiguousarray(block, dtype=np.float32)
        if not dense.flags.writeable:  # a slice of a memory-mapped prepared graph: own the rank's rows
            dense = dense.copy()
        features = torch.from_numpy(dense).to(device)
    masks = tuple(torch.from_numpy(m[r0:r1].copy()).to(device)
                  for m in (graph.train_mask, graph.val_mask, graph.test_mask))
    totals = tuple(int(m.sum()) for m in (graph.train_mask, graph.val_mask, graph.test_mask))
    labels = torch.from_numpy(target_block(graph.labels[r0:r1])).to(device)
    return LocalShard(features, labels, masks, totals)
