"""The contextual SBM drawn in seeded parts (``csbm:...,chunked=1``): the same graph for any number of processes.

`gridgnn.data.generators.csbm` draws everything from one generator in sequence, which no process can skip into
(numpy's bounded integers and normals consume a varying number of draws). With ``chunked=1`` every part has a
generator of its own and every per-vertex quantity is a pointwise function of the vertex, so a distributed
preparation (`gridgnn.prepare.pipeline`) draws only its own edges and rows and gets the one-process graph:

- **labels**: ``π(v) mod K`` for a seeded bijection π of the vertices (`gridgnn.data.bijection`): classes of
  equal size up to one, in random order, as ``csbm``'s permuted ``arange(n) % K``; the j-th member of class c is
  ``π⁻¹(c + K j)``, so a member is found without a table;
- **edges** (about ``n * avg_degree / 2`` undirected, ``n * avg_degree`` directed), chunk k of `CHUNK_EDGES`
  drawing from ``default_rng([seed, CSBM_STREAM, 1, k])``: a uniform source; with probability ``homophily`` a
  uniform target in its class (a uniform member index), else a uniform vertex of another class (a uniform place
  among the positions of π not congruent to the class);
- **features**: ``mu[label] + N(0, 1)``, with class means ``mu ~ N(0, signal²)`` from
  ``default_rng([seed, CSBM_STREAM, 2])`` and vertex chunk j of `CHUNK_ROWS` drawing its noise from
  ``default_rng([seed, CSBM_STREAM, 3, j])``;
- **split**: a vertex's place in its class (``π(v) // K``, random) below 20 trains, below 50 validates, else
  tests (Shchur et al.'s 20/30 per class, as ``csbm``); with ``labelled`` < 1 the vertices with ``ρ(v) < m``
  keep their class (ρ a second bijection, m = ``max(1, round(labelled * n))``), every other one is -1, and the
  labelled ones split 60/20/20 by ``ρ``.

The distributions are ``csbm``'s; the graphs are not (a new stream layout), so ``chunked`` is a parameter and
the default keeps every graph ``csbm`` gave before. Pure numpy, not collective.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.data.bijection import random_bijection, random_bijection_inverse

CSBM_STREAM = 5
"""The generator streams of the chunked csbm (R-MAT's scramble uses 2, ``--reorder random`` 3, Â's column order
4)."""

CHUNK_EDGES = 1 << 16
"""Edges one generator draws."""

CHUNK_ROWS = 1 << 16
"""Vertices whose feature noise one generator draws."""

DRAW_ROWS = 1 << 12
"""Rows of noise drawn at a time from a chunk's generator (the same stream as drawing the chunk whole)."""


@dataclass(frozen=True)
class CsbmParts:
    """The parameters of one chunked csbm graph (as `gridgnn.data.generators.csbm` takes them, ``avg_degree`` and
    ``homophily`` already resolved from ``p_in``/``p_out``), and its parts."""

    nodes: int
    classes: int
    features: int
    avg_degree: float
    homophily: float
    signal: float
    seed: int
    directed: bool
    labelled: float = 1.0

    @property
    def num_edges(self) -> int:
        return int(round(self.nodes * self.avg_degree / (1 if self.directed else 2)))

    @property
    def num_chunks(self) -> int:
        """Edge chunks of `CHUNK_EDGES` (the last may be shorter)."""
        return -(-self.num_edges // CHUNK_EDGES)

    def _pi(self, ids: np.ndarray) -> np.ndarray:
        return random_bijection(ids, self.nodes, self.seed, stream=(CSBM_STREAM, 0))

    def class_sizes(self) -> np.ndarray:
        """(K,) int64: the members of each class (positions of π congruent to it)."""
        c = np.arange(self.classes, dtype=np.int64)
        return (self.nodes - c + self.classes - 1) // self.classes

    def edges(self, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) int64 of edge chunks [first, last), each from its own generator."""
        k = self.classes
        sizes = self.class_sizes()
        sources, targets = [], []
        for chunk in range(first, last):
            count = min(CHUNK_EDGES, self.num_edges - chunk * CHUNK_EDGES)
            rng = np.random.default_rng([self.seed, CSBM_STREAM, 1, chunk])
            src = rng.integers(0, self.nodes, count)
            c = self._pi(src) % k
            same = rng.random(count) < (self.homophily if k > 1 else 1.0)
            inside = c + k * (rng.random(count) * sizes[c]).astype(np.int64)  # a position of π in class c
            other = (rng.random(count) * (self.nodes - sizes[c])).astype(np.int64)  # the other'th outside c
            if k > 1:
                block, offset = other // (k - 1), other % (k - 1)
                outside = block * k + offset + (offset >= c)  # skip c in every block of k positions
            else:
                outside = inside
            sources.append(src)
            targets.append(random_bijection_inverse(np.where(same, inside, outside), self.nodes, self.seed,
                                                    stream=(CSBM_STREAM, 0)))
        empty = np.zeros(0, dtype=np.int64)
        return (np.concatenate(sources) if sources else empty), (np.concatenate(targets) if targets else empty)

    def means(self) -> np.ndarray:
        """(K, f) float32: the class means."""
        rng = np.random.default_rng([self.seed, CSBM_STREAM, 2])
        return rng.normal(0.0, self.signal, size=(self.classes, self.features)).astype(np.float32)

    def node_rows(self, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        """Features (r1 - r0, f) float32, labels (r1 - r0,) int64 and (train, val, test) masks of vertices
        [r0, r1)."""
        ids = np.arange(r0, r1, dtype=np.int64)
        pi = self._pi(ids)  # a vertex's class is pi mod K, its place in the class pi // K
        labels = pi % self.classes
        x = np.empty((r1 - r0, self.features), dtype=np.float32)
        for j in range(r0 // CHUNK_ROWS, -(-r1 // CHUNK_ROWS)):
            lo, hi = j * CHUNK_ROWS, min((j + 1) * CHUNK_ROWS, self.nodes)
            rng = np.random.default_rng([self.seed, CSBM_STREAM, 3, j])
            for s in range(lo, min(hi, r1), DRAW_ROWS):  # the chunk's stream in slices, up to the last row wanted
                noise = rng.standard_normal((min(DRAW_ROWS, hi - s), self.features), dtype=np.float32)
                a, b = max(s, r0), min(s + len(noise), r1)
                if b > a:
                    x[a - r0:b - r0] = noise[a - s:b - s]
        x += self.means()[labels]  # the true class, also where the label is hidden below
        if self.labelled < 1.0:
            rho, kept = self._rho(ids), self._kept_count()
            labels = np.where(rho < kept, labels, -1)
            train_end = int(round(0.6 * kept))
            val_end = train_end + min(int(round(0.2 * kept)), kept - train_end)
            masks = (rho < train_end, (rho >= train_end) & (rho < val_end), (rho >= val_end) & (rho < kept))
        else:
            place = pi // self.classes
            masks = (place < 20, (place >= 20) & (place < 50), place >= 50)
        return x, labels, masks

    def _rho(self, ids: np.ndarray) -> np.ndarray:
        return random_bijection(ids, self.nodes, self.seed, stream=(CSBM_STREAM, 4))

    def _kept_count(self) -> int:
        return max(1, int(round(self.labelled * self.nodes)))

    def meta(self) -> dict:
        """The graph's meta (as ``csbm`` records it, with ``chunked``)."""
        meta = {"format": "csbm", "split": "per-class-20-30", "seed": self.seed, "homophily": self.homophily,
                "chunked": True}
        if self.labelled < 1.0:
            meta |= {"split": "random-60-20-20-of-labelled", "labelled": self.labelled}
        return meta
