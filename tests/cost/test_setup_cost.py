"""The local work of a cover SpMM's set-up (`gridgnn.cost.setup_cost`): the model counts, for every rank at once,
the entries and pairs that rank's receiver side reads and covers in `gridgnn.spmm.cover_15d` (counted here rank
by rank from the cuts it makes), and the planner adds it to the set-up's seconds."""

from __future__ import annotations

import numpy as np
import pytest
import spmm_workers as w

import gridgnn.cost.setup_cost as setup_cost
from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import comm_seconds, predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.rank_cost import shape_blocks
from gridgnn.grid.shape import resolve_grid
from gridgnn.nn.trace import model_spec
from gridgnn.spmm.cover_15d import receiver_cuts

N = 61


@pytest.mark.parametrize("algo,p,c", [("1d", 4, None), ("1.5d", 4, 2), ("1.5d", 6, 3), ("1d", 1, None)])
def test_cover_setup_work_counts_what_each_receiver_cuts_and_covers(algo, p, c):
    adj = w.random_directed(N, seed=5)
    stats = GraphStats("test", N, adj.nnz, 1, 1, None, adj.indptr, adj.indices)
    shape = resolve_grid(algo, p, replication=c)
    blocks = shape_blocks(shape, stats)
    bounds = [int(b) for b in blocks.layout.row_bounds]
    group = blocks.groups
    expected = []
    for rank in range(p):
        i = int(blocks.coords["row"][rank])
        share = blocks.layout.handled_by(int(group[rank]))  # the column blocks CoverSpMM15D cuts for this rank
        cuts = receiver_cuts(adj, bounds, i, share)
        pairs = [j for j in share if j != i]
        # it reads its whole row block whether or not its replica covers a pair (one row block: no cover at all)
        row_entries = int(adj.indptr[bounds[i + 1]] - adj.indptr[bounds[i]]) if len(bounds) > 2 else 0
        expected.append(setup_cost.ROW_ENTRY_S * row_entries + setup_cost.CUT_ENTRY_S * sum(cuts[j].nnz for j in pairs)
                        + setup_cost.PAIR_S * len(pairs))
    np.testing.assert_allclose(setup_cost.cover_setup_seconds(blocks), expected, rtol=1e-12)
    if p > 1:
        assert min(expected) > 0


def test_the_planner_adds_the_cover_work_to_the_set_up_seconds():
    adj = w.random_directed(N, seed=5)
    stats = GraphStats("test", N, adj.nnz, 8, 3, None, adj.indptr, adj.indices)
    spec, shape = model_spec(TrainConfig(), stats), resolve_grid("1d", 4)
    cover = predict_epoch(spec, stats, shape, comm="cover")
    collectives = comm_seconds(cover.setup_terms, shape, cover_profile(cover), placed_by=cover.terms)
    np.testing.assert_allclose(cover.setup_s - collectives, setup_cost.cover_setup_seconds(shape_blocks(shape, stats)))
    sparse = predict_epoch(spec, stats, shape, comm="sparse")  # no local work priced beside its collectives
    np.testing.assert_allclose(sparse.setup_s, comm_seconds(sparse.setup_terms, shape, cover_profile(sparse),
                                                            placed_by=sparse.terms))


def cover_profile(prediction):
    from gridgnn.cost.profile import load_profile

    return load_profile(prediction.profile_name)

