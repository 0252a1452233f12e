"""``csbm:...,chunked=1`` (`gridgnn.data.csbm_parts`): the contextual SBM drawn in seeded parts, so that P processes
of a distributed preparation each draw their own edges and rows and the folder equals the one-process folder
(several P, shard counts, directed, hidden labels, ``p_in``/``p_out``, one class, edges over several chunks);
its distributions are ``csbm``'s (balanced classes, the asked homophily and degree, 20/30 per class); the
unchunked ``csbm`` is refused by distributed preparation in one line and keeps its graphs."""

from __future__ import annotations

import numpy as np
import pytest
from prepare_workers import job_args
from test_distributed_prepare import assert_same_graph, distributed, one_process

import gridgnn
from gridgnn.errors import ConfigError
from gridgnn.prepare.launch import plan_job


@pytest.mark.parametrize("spec, nprocs, shards, directed", [
    ("csbm:nodes=3000,chunked=1", 2, 2, False),
    ("csbm:nodes=20000,avg_degree=14,features=8,chunked=1", 3, 5, False),  # 140,000 edges: 3 chunks, 1 round
    ("csbm:nodes=4000,labelled=0.3,chunked=1", 2, 3, True),
    ("csbm:nodes=2000,p_in=0.02,p_out=0.001,classes=4,chunked=1", 3, 3, False),
    ("csbm:nodes=500,classes=1,chunked=1", 2, 2, False),
])
def test_a_chunked_csbm_prepared_by_p_processes_equals_the_one_process_folder(tmp_path, spec, nprocs, shards,
                                                                             directed):
    expected = one_process(tmp_path, spec, "gcn", directed=directed, seed=3)
    assert_same_graph(expected, distributed(tmp_path, spec, "gcn", nprocs, shards, directed=directed, seed=3))


def test_the_chunked_csbm_draws_csbm_s_distributions():
    graph = gridgnn.load_dataset("csbm:nodes=6000,classes=6,avg_degree=12,homophily=0.7,chunked=1", seed=2)
    counts = np.bincount(graph.labels)
    assert counts.tolist() == [1000] * 6
    adj = graph.adj.tocoo()
    assert abs(adj.nnz / 6000 - 12) < 0.3  # symmetrized, duplicates and loops dropped
    same = (graph.labels[adj.row] == graph.labels[adj.col]).mean()
    assert abs(same - 0.7) < 0.02
    for mask, per_class in ((graph.train_mask, 20), (graph.val_mask, 30)):
        assert np.bincount(graph.labels[mask], minlength=6).tolist() == [per_class] * 6
    assert not (graph.train_mask & graph.val_mask).any() and (graph.train_mask | graph.val_mask | graph.test_mask).all()
    means = np.stack([graph.features[graph.labels == c].mean(axis=0) for c in range(6)])
    assert np.abs(means - means.mean(axis=0)).max() > 0.2  # the class signal is there
    other = gridgnn.load_dataset("csbm:nodes=6000,classes=6,avg_degree=12,homophily=0.7,chunked=1", seed=3)
    assert (other.adj != graph.adj).nnz > 0  # another seed, another graph


def test_hidden_labels_split_among_the_labelled():
    graph = gridgnn.load_dataset("csbm:nodes=5000,labelled=0.2,chunked=1", seed=1)
    labelled = graph.labels >= 0
    assert labelled.sum() == 1000
    assert (graph.train_mask.sum(), graph.val_mask.sum(), graph.test_mask.sum()) == (600, 200, 200)
    assert not ((graph.train_mask | graph.val_mask | graph.test_mask) & ~labelled).any()


def test_the_single_stream_csbm_is_refused_by_parts_and_keeps_its_graphs(tmp_path):
    with pytest.raises(ConfigError, match="add chunked=1"):
        plan_job(job_args("csbm:nodes=500"), "gcn", 2, str(tmp_path))
    from gridgnn.data.prepared import graph_digest

    plain = gridgnn.load_dataset("csbm:nodes=500", seed=2)
    assert "chunked" not in plain.meta
    before = gridgnn.load_dataset("csbm:nodes=3000", seed=2)  # the graph of the version before chunked existed
    assert graph_digest(before) == "f5257b9136dbb2bf23416d82b1eb48e7dfb41cbab40a22917c6439c857abaa88"
    assert (plain.adj != gridgnn.load_dataset("csbm:nodes=500,chunked=1", seed=2).adj).nnz > 0
