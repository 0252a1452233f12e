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
