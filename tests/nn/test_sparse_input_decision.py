"""Sparse or dense input features are decided on the whole graph, alike on every rank (`stays_sparse`).

A rank's block may be denser or sparser than the whole. Decided block by block, ranks of one grid used to take
different paths (one sparse, one dense), and with ``--defer-weight-gather`` only the sparse ones entered the
feature weights' row exchange: the collectives did not match and the run aborted. Here the halves of the graph
differ in density on either side of the limit; training on 2 and 4 ranks equals one process.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

import gridgnn
from gridgnn.nn.features import SPARSE_DENSITY_LIMIT, SparseFeatures, as_model_input, stays_sparse


def _halves(n: int, f: int, dense_half: float, sparse_half: float, seed: int = 0) -> sp.csr_matrix:
    """(n, f) features whose first half has density ``dense_half`` and second half ``sparse_half``."""
    rng = np.random.default_rng(seed)
    mask = np.vstack([rng.random((n // 2, f)) < dense_half, rng.random((n - n // 2, f)) < sparse_half])
    mask[np.arange(n), rng.integers(0, f, n)] = True  # every vertex has a feature
    return sp.csr_matrix(mask.astype(np.float32) * rng.random((n, f)).astype(np.float32))


def test_the_decision_follows_the_whole_matrix_not_the_block():
    features = _halves(200, 40, 0.6, 0.02)  # whole above the limit, second half far below
    assert not stays_sparse(features) and features.nnz > SPARSE_DENSITY_LIMIT * 200 * 40
    block = features[100:]
    assert isinstance(as_model_input(block), SparseFeatures)  # alone, the block would stay sparse
    assert not isinstance(as_model_input(block, sparse=stays_sparse(features)), SparseFeatures)
    assert isinstance(as_model_input(features[:100], sparse=True), SparseFeatures)
    assert not stays_sparse(features.toarray())


@pytest.mark.parametrize("dense_half, sparse_half, algo, nprocs", [(0.6, 0.02, "1d", 2), (0.4, 0.02, "1d", 2),
                                                                   (0.6, 0.02, "2d", 4)])
def test_ranks_of_mixed_density_train_as_one_process(dense_half, sparse_half, algo, nprocs):
    base = gridgnn.as_graph("csbm:nodes=160,classes=3,features=40", seed=1)
    graph = dataclasses.replace(base, features=_halves(base.num_nodes, base.num_features, dense_half, sparse_half))
    options = dict(epochs=3, hidden=8, lr=0.01, seed=0)
    one = gridgnn.fit(graph, **options)
    many = gridgnn.fit(graph, nprocs=nprocs, threads=1, algo=algo, comm="dense", reorder="none",
                       defer_weight_gather=True, **options)
    np.testing.assert_allclose([e.loss for e in many.history], [e.loss for e in one.history], rtol=1e-4)
    assert many.metrics["setup"]["defer_weight_gather"] is (algo == "2d" or stays_sparse(graph.features))
