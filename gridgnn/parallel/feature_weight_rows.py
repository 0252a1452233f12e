"""Sparse reduction of the weights that read sparse input features (``--defer-weight-gather``).

A weight W (F, w) that only products of the input features read (a first layer's ``X W``:
`gridgnn.cost.operations.ModelOps.feature_weights`) gets, on the processes holding block row i of X, a
gradient that is zero outside the rows T_i: the feature columns its vertices have (on bag-of-words features a
block row has a fraction of them). 1D and 1.5D all-reduce every gradient on ``row``; for these weights
`FeatureWeightRows` moves only the rows that are not zero, and each process updates only the rows it owns,
balanced blocks of the F rows over the R processes of ``row`` (`gridgnn.partition.block_bounds`):

=========  ============================  =============================================================
step       collective on ``row``          process i receives
=========  ============================  =============================================================
reduce     all-to-all (phase              from every r != i the gradient rows T_r ∩ own_i, which it adds
           ``weight_grad``)               to its own rows: the whole gradient of the rows it owns
refresh    all-to-all, after the          from every owner q != i the updated rows T_i ∩ own_q of W: the
           optimizer step                 rows its next product reads
gather     all-gather, padded             every owner's block of W (and of Adam's moments), where something
           (`gather_parameters`)          reads the weight whole: a checkpoint, the end of training
=========  ============================  =============================================================

Adam is element-wise, so each process's update of its own rows equals the single-process update; the other
rows go stale (rows of T_i are refreshed before they are read, the rest are never read: they multiply feature
columns this process's vertices lack). Per step a process receives the rows others touch in its block plus its
touched rows owned by others, where the all-reduce moves about twice the whole weight; the cost model counts
the same rows (`gridgnn.cost.feature_row_cost`, from `gridgnn.cost.graph_stats.GraphStats.feature_touch_in`).
Every process computes every T_r from the global feature structure it loaded (no index exchange).
The 1.5D replicas of block row i hold the same rows and do the same, each on its own ``row`` group.

On 2D and 3D a process (i, j) (3D: (i, j, l)) reads only its column block of such a weight
(`gridgnn.parallel.grid_ops.GridOps.linear`): the rows F_j of the input columns it holds when its product
reduce-scatters partial sums, or every row and the output columns of block j when it gathers the input or keeps
full feature rows. Its gradient there is zero outside T_i, so the same three steps run on that block among the
pr processes of grid column j (axis ``row``), with owners cutting the block's rows: `FeatureRowGroups` keeps one
`FeatureWeightRows` per row range a weight's block spans. On 3D process (i, j, l) holds the rows of sub-block
S[i][l] (T_il their features): the exchange runs on ``row`` within depth slice l, and the d processes (i, j, *)
own the same rows, whose sums they all-reduce on ``depth`` before each updates them alike (with every T_il all
features this moves the bytes of the block sum it replaces, up to rounding; fewer with fewer). The ``col`` all-gather of
the blocks is deferred as every ``--defer-weight-gather`` block is (`gather_parameters` runs the row gather,
then the column gather). `gridgnn.cost.feature_row_cost.feature_row_axis` says on which axis, for a grid shape,
or None where it does not apply (one block row; a 2D/3D grid with one column block, where every gradient is
all-reduced whole); the cost model prices it there too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from gridgnn.grid.comm import Communicator
from gridgnn.partition import block_bounds, block_sizes


class FeatureWeightRows:
    """The reduce, refresh and gather of the feature weights of the process at index ``me`` of ``axis``.

    ``touched[r]``: T_r, the sorted feature ids block row r holds (every r, alike on every process), counted
    from the first row of the weight block this object serves; ``num_features``: F, the block's rows. Index
    tensors on ``device``."""

    def __init__(self, comm: Communicator, touched: Sequence[np.ndarray], num_features: int, me: int,
                 device: torch.device, axis: str = "row", sum_axis: str | None = None):
        """``sum_axis`` (3D: ``depth``): the processes along it hold other rows of the same block row and the
        same owners; the owned rows' sums are all-reduced over it after the exchange on ``axis``."""
        self.comm, self.me, self.axis, self.sum_axis = comm, me, axis, sum_axis
        parts = len(touched)
        self.owner_bounds = block_bounds(num_features, parts, allow_empty=True, what="feature columns")
        lo, hi = self.owner_bounds[me], self.owner_bounds[me + 1]
        self.own = (lo, hi)

        def within(ids: np.ndarray, q: int) -> np.ndarray:
            a, b = np.searchsorted(ids, [self.owner_bounds[q], self.owner_bounds[q + 1]])
            return ids[a:b]

        mine = [within(touched[me], q) if q != me else np.empty(0, np.int64) for q in range(parts)]
        theirs = [within(touched[r], me) if r != me else np.empty(0, np.int64) for r in range(parts)]
        # reduce: send my rows owned by q, to q; receive the rows r holds in my block. refresh: the reverse.
        self.mine_rows = [len(ids) for ids in mine]
        self.their_rows = [len(ids) for ids in theirs]
        self.mine_ids = torch.from_numpy(np.concatenate(mine)).to(device)
        self.their_ids = torch.from_numpy(np.concatenate(theirs) - lo).to(device)  # rows of my block

    def reduce(self, grads: list[torch.Tensor], outs: list[torch.Tensor]) -> None:
        """Sum the gradients ``grads`` (each (F, w_k), this process's partial sums) over ``axis`` into the own
        rows of ``outs`` (same shapes; zero elsewhere is the caller's). Collective on ``axis``, then
        ``sum_axis``."""
        lo, hi = self.own
        send = torch.cat([g.index_select(0, self.mine_ids) for g in grads], dim=1)  # one row set for all weights
        received = self.comm.all_to_all(send, self.mine_rows, self.their_rows, self.axis)
        own = torch.cat([g[lo:hi] for g in grads], dim=1)  # a new tensor: the sum is formed in it
        own.index_add_(0, self.their_ids, received)
        if self.sum_axis is not None and own.numel():  # alike on the sum axis: the same owners, the same rows
            self.comm.all_reduce(own, self.sum_axis)
        offset = 0
        for out in outs:
            out[lo:hi].copy_(own[:, offset:offset + out.shape[1]])
            offset += out.shape[1]

    def refresh(self, weights: list[torch.Tensor]) -> None:
        """Fetch the rows of ``weights`` this process reads and others own (updated by their owners), in
        place. Collective on ``row``."""
        rows = self.their_ids + self.own[0]
        send = torch.cat([w.detach().index_select(0, rows) for w in weights], dim=1)
        received = self.comm.all_to_all(send, self.their_rows, self.mine_rows, self.axis)
        offset = 0
        for w in weights:
            w.detach().index_copy_(0, self.mine_ids, received[:, offset:offset + w.shape[1]])
            offset += w.shape[1]

    def gather(self, tensors: list[torch.Tensor]) -> None:
        """Every owner's rows of each tensor (each (F, w_k)) into place: one all-gather on ``row`` of the
        packed own blocks (padded to the largest). Collective on ``row``."""
        if not tensors:
            return
        lo, hi = self.own
        own = torch.cat([t.detach()[lo:hi] for t in tensors], dim=1)
        every = self.comm.all_gather_rows(own, self.axis, block_sizes(self.owner_bounds))
        offset = 0
        for t in tensors:
            t.detach().copy_(every[:, offset:offset + t.shape[1]])
            offset += t.shape[1]


def rows_within(touched: Sequence[np.ndarray], lo: int, hi: int) -> list[np.ndarray]:
    """Each sorted id array of ``touched`` cut to ``[lo, hi)`` and counted from ``lo``. Not collective."""
    out = []
    for ids in touched:
        a, b = np.searchsorted(ids, [lo, hi])
        out.append(ids[a:b] - lo)
    return out


class FeatureRowGroups:
    """One `FeatureWeightRows` per row range ``[lo, hi)`` of the feature weights a process holds (the whole
    ``[0, F)`` on 1D/1.5D; on 2D/3D a weight's column block may span the rows of the input columns it holds),
    built on first use from the touched feature ids ``touched[r]`` of the ``len(touched)`` processes of
    ``axis`` (global feature ids, sorted); ``sum_axis`` as `FeatureWeightRows`. Not collective."""

    def __init__(self, comm: Communicator, touched: Sequence[np.ndarray], axis: str, device: torch.device,
                 sum_axis: str | None = None):
        self.comm, self.touched, self.axis, self.device = comm, list(touched), axis, device
        self.sum_axis = sum_axis
        self.me = comm.grid.index(axis)
        self._groups: dict[tuple[int, int], FeatureWeightRows] = {}

    def of(self, lo: int, hi: int) -> FeatureWeightRows:
        """The exchanges of the weight rows ``[lo, hi)`` (feature ids). Not collective."""
        if (lo, hi) not in self._groups:
            self._groups[lo, hi] = FeatureWeightRows(self.comm, rows_within(self.touched, lo, hi), hi - lo,
                                                     self.me, self.device, self.axis, self.sum_axis)
        return self._groups[lo, hi]
