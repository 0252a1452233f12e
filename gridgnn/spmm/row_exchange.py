"""Set-up of sparse communication: tell each process which of its rows this process needs.

Sparse SpMMs (``--comm sparse``) move only the rows of the dense operand a receiver's Â block touches. Each
receiver knows its wanted rows from its own Â rows (`gridgnn.cost.sparse_stages.touched_columns`); the
holders learn them once, at set-up, as integers (`exchange_wanted`), and thereafter send those rows in
forward and receive the matching rows of ``Âᵀ G`` in backward.
"""

from __future__ import annotations

import numpy as np
import torch

from gridgnn.grid.comm import Communicator


def exchange_wanted(comm: Communicator, axis: str, wanted: list[np.ndarray]) -> list[np.ndarray]:
    """Collective on ``axis`` (two all-to-alls of int64, phase as the caller's; set-up only).

    ``wanted[p]``: the global row ids (int64) this process needs from process p of the group (the own
    entry must be empty). Returns ``asked[p]``: the ids process p needs from this process.
    """
    size, me = comm.grid.size(axis), comm.grid.index(axis)
    if size == 1:
        return [np.zeros(0, dtype=np.int64)]
    device = comm.grid.device
    others = [1 if p != me else 0 for p in range(size)]
    counts = torch.tensor([len(wanted[p]) for p in range(size) if p != me], dtype=torch.int64, device=device)
    their_counts = comm.all_to_all(counts, others, others, axis).cpu().tolist()
    their_counts.insert(me, 0)
    ids = np.concatenate([np.asarray(w, dtype=np.int64) for w in wanted]) if wanted else np.zeros(0, np.int64)
    send_rows = [len(w) for w in wanted]
    received = comm.all_to_all(torch.from_numpy(ids).to(device), send_rows, their_counts, axis).cpu().numpy()
    return np.split(received, np.cumsum(their_counts)[:-1])


def gather_index(asked: list[np.ndarray], start: int, device: torch.device) -> torch.Tensor:
    """The local row positions (int64 tensor) of every asked row, concatenated in group order; ``start`` is
    the global id of this process's first row."""
    flat = np.concatenate(asked) - start if asked else np.zeros(0, dtype=np.int64)
    return torch.from_numpy(flat.astype(np.int64)).to(device)


class RowExchange:
    """The exchange of wanted rows of a dense operand on ``axis``, set up once: this process receives the
    ``wanted[p]`` rows (global ids, int64) of each process p of the group and sends the rows its peers asked of
    it. `fetch_async` moves them forward; `return_async` sends rows shaped like the received ones back to their
    holders, which `add_returned` adds into place (a backward pass). Used by sparse 1D/1.5D SpMM
    (`gridgnn.spmm.sparse_15d`) and message passing's halo (`gridgnn.parallel.edge_halo`).

    Set-up: collective on ``axis`` (`exchange_wanted`, in the caller's phase); ``start`` is the global id of
    this process's first row."""

    def __init__(self, comm: Communicator, axis: str, wanted: list[np.ndarray], start: int):
        self.comm, self.axis = comm, axis
        self.recv_rows = [len(w) for w in wanted]
        asked = exchange_wanted(comm, axis, wanted)
        self.send_rows = [len(a) for a in asked]
        self.send_index = gather_index(asked, start, comm.grid.device)

    @property
    def received(self) -> int:
        """Rows this process receives in each forward exchange."""
        return sum(self.recv_rows)

    def fetch_async(self, x: torch.Tensor):
        """The wanted rows of the holders' ``x`` (this process sends its asked rows of its own ``x``), as a
        pending all-to-all: (received, w) when waited. Collective on ``axis``."""
        return self.comm.all_to_all_async(x[self.send_index].contiguous(), self.send_rows, self.recv_rows,
                                          self.axis)

    def return_async(self, rows: torch.Tensor):
        """``rows`` (received, w), one per received row, back to their holders, as a pending all-to-all: (asked,
        w) when waited, for `add_returned`. Collective on ``axis``."""
        return self.comm.all_to_all_async(rows.contiguous(), self.recv_rows, self.send_rows, self.axis)

    def add_returned(self, into: torch.Tensor, returned: torch.Tensor) -> torch.Tensor:
        """Add the returned rows into this process's rows of ``into`` (in place; returns it). Not collective."""
        return into.index_add_(0, self.send_index, returned)


def pair_counts(send_rows: list[int], recv_rows: list[int], me: int) -> np.ndarray:
    """(R, R) int64 of one process's row exchange on ``row``: in its own row the rows it receives from each
    peer (forward), in its own column the rows each peer receives from it (and returns in backward); what
    `gridgnn.cost.spmm_plan.carried_by_rows` reads of it. Not collective."""
    counts = np.zeros((len(send_rows), len(send_rows)), dtype=np.int64)
    counts[me, :] = recv_rows
    counts[:, me] = send_rows
    counts[me, me] = 0
    return counts
