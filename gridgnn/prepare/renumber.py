"""Compact vertex ids, computed distributed: the distinct ids of every process's edges, in sorted order,
become 0..n-1, as the one-process edge-list reader numbers them (``np.unique``). Collective on the world.

Each process's distinct ids go to the owner of their value range (splitters from a sample of every
process's ids, so that ranges hold similar counts); each owner merges what it received, and the counts give
each range its first compact id. An owner answers every process's ids with their compact ids; the ranges
then hand each row block's original ids to its owner (`RenumberedIds.vertex_ids`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.prepare.exchange import all_to_all_rows, ask_owners, exchange_counts, gather_all, send_to_owners, world

SAMPLES = 256
"""Ids each process contributes to choosing the range splitters."""


@dataclass
class RenumberedIds:
    """This process's share of the renumbering: ``held`` (m,) int64, the sorted original ids of its value
    range, whose compact ids are ``first + arange(m)``; ``num_nodes``: the distinct ids of all processes."""

    held: np.ndarray
    first: int
    num_nodes: int

    def vertex_ids(self, r0: int, r1: int) -> np.ndarray:
        """Collective on the world: the original ids (int64) of compact rows [r0, r1) of this process (each
        process passes its own row block)."""
        _, size = world()
        mine = (self.first, self.first + len(self.held))
        wanted = gather_all(np.array([r0, r1], dtype=np.int64))  # (P, 2) every process's row block
        lo = np.clip(wanted[:, 0], *mine) - self.first
        hi = np.clip(wanted[:, 1], *mine) - self.first
        send_counts = np.maximum(hi - lo, 0).astype(np.int64)
        rows = np.concatenate([self.held[a:b] for a, b in zip(lo, hi, strict=True)] or [np.empty(0, np.int64)])
        received = all_to_all_rows(rows, send_counts, exchange_counts(send_counts))
        return received  # senders hold increasing ranges: in rank order the ids come in compact order

    def compact(self, ids: np.ndarray, splitters: np.ndarray) -> np.ndarray:
        """Collective on the world: the compact ids of original ``ids`` (any of this process's)."""
        distinct, inverse = np.unique(ids, return_inverse=True)
        owners = np.searchsorted(splitters, distinct, side="right")
        answers = ask_owners(distinct, owners, lambda asked: self.first + np.searchsorted(self.held, asked))
        return answers[inverse].reshape(ids.shape)


def renumber(edges: np.ndarray) -> tuple[np.ndarray, RenumberedIds]:
    """Collective on the world: ``edges`` (E, 2) int64 original ids -> (the same edges in compact ids, this
    process's `RenumberedIds`)."""
    _, size = world()
    distinct = np.unique(edges)
    picks = distinct[np.linspace(0, len(distinct) - 1, min(SAMPLES, len(distinct))).astype(np.int64)] \
        if len(distinct) else np.empty(0, dtype=np.int64)
    sample = np.full(SAMPLES, -1, dtype=np.int64)  # ids are non-negative: -1 pads
    sample[:len(picks)] = picks
    pooled = np.sort(gather_all(sample).ravel())
    pooled = pooled[pooled >= 0]
    splitters = pooled[(np.arange(1, size) * len(pooled)) // size] if len(pooled) else np.zeros(size - 1, np.int64)
    owners = np.searchsorted(splitters, distinct, side="right")
    (received,) = send_to_owners(owners, distinct)
    held = np.unique(received)
    counts = gather_all(np.array([len(held)], dtype=np.int64))[:, 0]
    rank, _ = world()
    share = RenumberedIds(held, int(counts[:rank].sum()), int(counts.sum()))
    return share.compact(edges, splitters), share
