"""1D and 1.5D SpMM by per-pair vertex cover (``--comm cover``): each pair of processes exchanges the fewest
rows its cut allows, some as rows of X (post-aggregation), some as partial sums (pre-aggregation).

Same grid, layout and Â blocks as `gridgnn.spmm.spmm_15d` (read its table). For the pair "column block j
sends to row block i" (j in replica k's share, j != i), the cut is Â[i, j]; its minimum vertex cover
(`gridgnn.sparse.cover.pair_cover`) names the columns c of block j whose rows X[c] travel, and the rows r of
block i whose partial sums ``Σ_c Â[r, c] X[c]`` over the remaining columns travel. At set-up each receiver
cuts its own rows only, computes each of its pairs' covers once, and tells each sender its cover columns and
the entries of the partial sums it computes (`tell_senders`: three all-to-alls on ``row``, priced by
`gridgnn.cost.sparse_cost.cover_setup_terms`); no process reads another's rows of Â.

=========  ====================================================================================================
process    holds (beyond dense 1.5D's own block Â[i, i])
=========  ====================================================================================================
(i, k)     receiver: ``post`` = the entries of Â[i, j] whose column is in the pair's cover, for every remote j
           of the share, columns side by side in group order; the local rows ``pre_targets`` its received
           partial sums add into
(j, k)     sender (j in replica k's share): ``pre`` = for every i != j, the rows of Â[i, j] in the pair's cover
           restricted to the columns not in it, stacked in group order (rows: partial sums to send, columns:
           block j's rows of X); ``post_index``: its local rows of X each receiver's cover names
=========  ====================================================================================================

Forward, one all-to-all on ``row`` (uneven parts): to each i, the rows X[cover columns] then the partial sums
``pre X[j]`` of its cover rows; the receiver multiplies ``post`` by the rows and adds the sums into their rows;
then the replica all-reduce on ``rep`` as in dense 1.5D. Backward (Âᵀ) the roles transpose: the receiver
returns ``postᵀ G[i]`` (one row per received row of X) and the rows G[cover rows] of its gradient; the sender
adds the first into dX[j] (``index_add``) and multiplies the second by ``preᵀ``; then the broadcast on ``rep``.
Every entry of Â[i, j] is multiplied exactly once, on one side, so results equal the dense SpMM's up to the
order of float32 additions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from gridgnn.cost.spmm_plan import carried_by_rows
from gridgnn.cost.terms import SpMMPlan
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.sparse.cover import canonical, column_block_cuts, covered_columns, pair_cover, uncovered_entries
from gridgnn.sparse.csr import SparseBlock, index_dtype_for
from gridgnn.spmm.base import DistributedSpMM
from gridgnn.spmm.row_exchange import exchange_wanted, pair_counts
from gridgnn.spmm.spmm_15d import SpMM15D


def pair_cut(adj, bounds: list[int], receiver: int, sender: int) -> sp.csr_matrix:
    """Â[receiver's rows, sender's columns] (local ids, CSR with sorted indices): the cut the receiver covers.
    ``adj``: a scipy CSR matrix or a memory-mapped `gridgnn.data.prepared.RowBlockCSR` (only the receiver's rows
    are read)."""
    rows, columns = slice(bounds[receiver], bounds[receiver + 1]), slice(bounds[sender], bounds[sender + 1])
    return canonical(adj[rows, columns])


def receiver_cuts(adj, bounds: list[int], receiver: int, senders: Sequence[int]) -> dict[int, sp.csr_matrix]:
    """`pair_cut` of ``receiver`` with every block of ``senders``: its row block read once
    (`gridgnn.sparse.cover.column_block_cuts`)."""
    return column_block_cuts(adj[bounds[receiver]:bounds[receiver + 1]], bounds, senders)


def tell_senders(comm: Communicator, told: dict[int, tuple[np.ndarray, sp.csr_matrix]], width: int,
                 dtype: np.dtype) -> dict[int, tuple[np.ndarray, sp.csr_matrix]]:
    """Collective on ``row`` (three all-to-alls, set-up, the caller's phase): every process sends each sender
    j of its pairs ``told[j]`` = (the cover's columns, sender-local int64; the partial sums' entries, a CSR of
    the cover rows x block j's columns) and receives, as the sender of its own block (``width`` columns), the
    same from each receiver q that covers a pair with it: ``heard[q]`` (none for an empty cover). The ids go as
    one int64 message per peer through the sparse index exchange (`gridgnn.spmm.row_exchange.exchange_wanted`:
    its counts, then the messages ``[columns, rows, the columns, each row's entry count, the entries'
    columns]``), then the values (``dtype``: Â's own, float32 as gridgnn builds it). Call it in phase ``other``:
    float32 values in a wire-precision phase would be encoded."""
    size, me, device = comm.grid.size("row"), comm.grid.index("row"), comm.grid.device
    empty = (np.zeros(0, dtype=np.int64), sp.csr_matrix((0, 0), dtype=dtype))
    mine = [told.get(p, empty) for p in range(size)]
    messages = [np.concatenate([[len(c), pre.shape[0]], c, np.diff(pre.indptr), pre.indices]).astype(np.int64)
                if p != me else empty[0] for p, (c, pre) in enumerate(mine)]
    heard_ids = exchange_wanted(comm, "row", messages)
    values = [pre.data.astype(dtype) if p != me else np.zeros(0, dtype=dtype) for p, (_, pre) in enumerate(mine)]
    their_values = [len(m) - 2 - int(m[0]) - int(m[1]) if len(m) else 0 for m in heard_ids]
    got = comm.all_to_all(torch.from_numpy(np.concatenate(values)).to(device), [len(v) for v in values],
                          their_values, "row").cpu().numpy()
    heard, at = {}, 0
    for q, message in enumerate(heard_ids):
        if q == me:
            continue
        n_cols, n_rows, nnz = int(message[0]), int(message[1]), their_values[q]
        if n_cols + n_rows == 0:  # an empty cover: nothing to send to q (entries need cover rows)
            if nnz:
                raise RuntimeError(f"cover set-up: process {q} of 'row' sent {nnz} entries without cover rows")
            continue
        columns = message[2:2 + n_cols]
        pointers = np.concatenate([[0], np.cumsum(message[2 + n_cols:2 + n_cols + n_rows])])
        pre = sp.csr_matrix((got[at:at + nnz], message[2 + n_cols + n_rows:], pointers), shape=(n_rows, width))
        at += nnz
        heard[q] = (columns, pre)
    return heard


class CoverSpMM15D(SpMM15D):
    """1.5D (and 1D) SpMM that moves each pair's minimum vertex cover. Built once: each process reads its own
    rows of Â; collective on ``row`` at set-up (`tell_senders`)."""

    def __init__(self, grid: ProcessGrid, comm: Communicator, adj, *, dtype: torch.dtype = torch.float32,
                 parts: Sequence[int] | None = None):
        DistributedSpMM.__init__(self, grid, comm, adj.shape[0], parts)
        self._place(grid)
        blocks = grid.size("row")
        self._index_dtype, self._dtype = index_dtype_for(self.num_nodes, adj.nnz), dtype
        wanted = [j for j in range(blocks) if j in self.share]  # this rank's cuts as receiver (and its own block)
        cuts = receiver_cuts(adj, self.bounds, self.i, wanted)
        own = cuts.pop(self.i, None)
        self.own = self._block(own) if own is not None else None
        told = self._receive(cuts, blocks)
        width = self.bounds[self.i + 1] - self.bounds[self.i]
        with comm.phase("other"):  # set-up: Â's values travel exactly, whatever the run's wire precision
            heard = tell_senders(comm, told, width, np.dtype(adj.dtype))
        self._send(heard, blocks, width)
        self.blocks = {}

    def _block(self, matrix) -> SparseBlock:
        """A scipy matrix as a `SparseBlock` on this process's device."""
        return SparseBlock.from_scipy(sp.csr_matrix(matrix), index_dtype=self._index_dtype, dtype=self._dtype,
                                      device=self.grid.device)

    def _index(self, parts: list[np.ndarray]) -> torch.Tensor:
        """The concatenation of ``parts`` as an int64 index tensor on this process's device."""
        flat = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
        return torch.from_numpy(flat).to(self.grid.device)

    def _receive(self, cuts: dict[int, sp.csr_matrix], blocks: int) -> dict[int, tuple[np.ndarray, sp.csr_matrix]]:
        """The receiver's side from its ``cuts`` (sender -> Â[i, j]): ``post`` (n_i x Σ cover columns), the
        received rows' layout, ``pre_targets``; returns what to tell each sender (`tell_senders`)."""
        n_i = self.bounds[self.i + 1] - self.bounds[self.i]
        pieces, post_pos, pre_pos, targets, recv_rows, told, offset = [], [], [], [], [], {}, 0
        for j in range(blocks):
            if j not in cuts:
                recv_rows.append(0)
                continue
            cut = cuts[j]
            cover = pair_cover(cut)
            pieces.append(covered_columns(cut, cover.columns))
            told[j] = (cover.columns, uncovered_entries(cut, cover.rows, cover.columns))
            post_pos.append(np.arange(offset, offset + len(cover.columns)))
            pre_pos.append(np.arange(offset + len(cover.columns), offset + cover.size))
            targets.append(cover.rows)
            recv_rows.append(cover.size)
            offset += cover.size
        self.recv_rows = recv_rows
        self.post = self._block(sp.hstack(pieces, format="csr")) if sum(p.shape[1] for p in pieces) else None
        self.recv_post, self.recv_pre, self.pre_targets = (self._index(post_pos), self._index(pre_pos),
                                                           self._index(targets))
        self.n_i = n_i
        return told

    def _send(self, heard: dict[int, tuple[np.ndarray, sp.csr_matrix]], blocks: int, width: int) -> None:
        """The sender's side from what each receiver told it (`tell_senders`): ``pre`` (Σ cover rows x n_j),
        ``post_index``, and the send buffer's layout."""
        send_rows = [0] * blocks
        post_index, pre_pieces, post_at, pre_at, offset = [], [], [], [], 0
        for q in sorted(heard):
            columns, pre = heard[q]
            pre_pieces.append(pre)
            post_index.append(columns)
            size = len(columns) + pre.shape[0]
            post_at.append(np.arange(offset, offset + len(columns)))
            pre_at.append(np.arange(offset + len(columns), offset + size))
            send_rows[q] = size
            offset += size
        self.send_rows = send_rows
        stacked = sp.vstack(pre_pieces, format="csr") if pre_pieces else sp.csr_matrix((0, width))
        self.pre = self._block(stacked) if stacked.shape[0] else None
        self.post_index, self.send_post, self.send_pre = (self._index(post_index), self._index(post_at),
                                                          self._index(pre_at))

    @property
    def stored_nnz(self) -> int:
        return sum(b.nnz for b in (self.own, self.post, self.pre) if b is not None)

    def plan(self, width: int, backward: bool) -> SpMMPlan:
        """1.5D's plan with its stages' row moves carried as this process's one all-to-all on ``row``
        (`gridgnn.cost.spmm_plan.carried_by_rows`, merged, with its exchange's counts). Not collective."""
        counts = pair_counts(self.send_rows, self.recv_rows, self.i)
        return carried_by_rows(SpMM15D.plan(self, width, backward), self.i, counts, backward, merged=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """X[i] (n_i x f) -> Y[i] (n_i x f). Collective on ``row`` (all-to-all) then ``rep`` (all-reduce)."""
        f = x.shape[1]
        send = x.new_empty((sum(self.send_rows), f))
        send[self.send_post] = x[self.post_index]
        if self.pre is not None:
            send[self.send_pre] = self.pre.matmul(x)
        pending = self.comm.all_to_all_async(send, self.send_rows, self.recv_rows, "row")
        if not self.comm.overlap:
            pending.wait()
        out = self.own.matmul(x) if self.own is not None else x.new_zeros((self.n_i, f))
        received = pending.wait()
        if self.post is not None:
            self.post.matmul_add(received[self.recv_post], out)
        out.index_add_(0, self.pre_targets, received[self.recv_pre])
        return self._finish(out, backward=False)

    def backward(self, grad_y: torch.Tensor) -> torch.Tensor:
        """G[i] (n_i x f) -> dX[i] (n_i x f). Collective on ``row`` (all-to-all) then ``rep`` (broadcast)."""
        f = grad_y.shape[1]
        back = grad_y.new_empty((sum(self.recv_rows), f))
        if self.post is not None:
            back[self.recv_post] = self.post.t_matmul(grad_y)
        back[self.recv_pre] = grad_y[self.pre_targets]
        pending = self.comm.all_to_all_async(back, self.recv_rows, self.send_rows, "row")
        if not self.comm.overlap:
            pending.wait()
        grad_x = self.own.t_matmul(grad_y) if self.own is not None else grad_y.new_zeros(grad_y.shape)
        received = pending.wait()
        grad_x.index_add_(0, self.post_index, received[self.send_post])
        if self.pre is not None:
            grad_x += self.pre.t_matmul(received[self.send_pre])
        return self._finish(grad_x, backward=True)
