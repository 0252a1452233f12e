"""The aggregation protocol (`gridgnn.nn.layout.Layout`): the one-process layout and a grid rank's both satisfy
it, its reductions are the identity on one process, and `Trainer` / `DistributedTrainer` share one construction
and one step (issue 14, item 3). Everything here runs in this process (a 1-process grid needs no group)."""

import numpy as np
import pytest
import torch
from model_helpers import random_graph

from gridgnn.config import TrainConfig
from gridgnn.data.operators import operator_matrix
from gridgnn.data.reorder import reorder_graph
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import resolve_grid
from gridgnn.nn.layout import Layout, LocalLayout
from gridgnn.nn.models import operator_of
from gridgnn.parallel.grid_ops import GridOps
from gridgnn.spmm.local import LocalSpMM
from gridgnn.train.loop.distributed import DistributedTrainer
from gridgnn.train.loop.trainer import Trainer

MODELS = {"gcn": {}, "sage": {}, "gin": {"gin_train_eps": True},
          "gat": {"heads": 2, "attn_dropout": 0.2}}


def _layouts(graph, model: str, algo: str) -> tuple[LocalLayout, GridOps]:
    operator = operator_of(model)
    adj = operator_matrix(operator, graph.adj)
    grid = ProcessGrid.create(resolve_grid(algo, 1))
    return LocalLayout(LocalSpMM(adj), operator), GridOps(grid, Communicator(grid), adj, operator=operator)


def test_both_layouts_satisfy_the_protocol_and_number_rows_alike():
    graph = random_graph(n=30)
    order = np.random.default_rng(0).permutation(30)
    for algo in ("1d", "2d"):
        local, ops = _layouts(graph, "gcn", algo)
        for layout in (local, ops):
            assert isinstance(layout, Layout)  # runtime check: every member of the protocol is there
            assert layout.row_range == (0, 30) and layout.col_range(8) == (0, 8)
            assert layout.device == torch.device("cpu")
            assert layout.row_ids(torch.device("cpu")).tolist() == list(range(30))
            layout.set_vertex_order(order)
            assert layout.row_ids(torch.device("cpu")).tolist() == order.tolist()
            layout.set_vertex_order(None)
            assert layout.row_ids(torch.device("cpu")).tolist() == list(range(30))
    assert not isinstance(LocalSpMM(graph.adj), Layout) and not isinstance(lambda x: x, Layout)


def test_local_reductions_are_the_identity_and_the_grids_sum_once():
    graph = random_graph(n=30)
    local, ops = _layouts(graph, "gcn", "2d")
    params = [torch.nn.Parameter(torch.ones(3, 2)), torch.nn.Parameter(torch.ones(2))]
    grads = [torch.full((3, 2), 2.0), None]
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    local.reduce_gradients(params)
    assert params[0].grad is grads[0] and params[1].grad is None  # untouched
    values = torch.tensor([1.5, 2.0], dtype=torch.float64)
    assert local.global_sum(values) is values
    ops.comm.reset()
    ops.reduce_gradients(params)  # one process: the sum is the process's own, a missing gradient zeros
    assert torch.equal(params[0].grad, grads[0]) and torch.equal(params[1].grad, torch.zeros(2))
    assert params[0].grad.untyped_storage().data_ptr() == params[1].grad.untyped_storage().data_ptr()
    assert torch.equal(ops.global_sum(values), values)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_trainers_share_construction_and_step(model):
    """The same model, optimizer and step on the one-process layout and on a 1-process grid: equal weights,
    optimizer settings, losses and accuracies; the grid's trainer only adds its communication record."""
    graph = random_graph(n=40, sparse_features=True)
    config = TrainConfig(epochs=2, hidden=6, weight_decay=0.01, lr=0.02, model=model, **MODELS[model])
    local, ops = _layouts(graph, model, "1d")
    single, grid = Trainer(config, graph, local), DistributedTrainer(config, graph, ops)
    assert single.layout is local and grid.layout is ops
    for a, b in zip(single.model.state_dict().values(), grid.model.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert single.optimizer.defaults == grid.optimizer.defaults and len(grid.optimizer.param_groups) == 1
    assert grid.optimizer.defaults["weight_decay"] == 0.01 and grid.optimizer.defaults["lr"] == 0.02
    with torch.random.fork_rng():
        for epoch in (1, 2):
            assert single.train_step(epoch) == grid.train_step(epoch)
            assert single.evaluate() == grid.evaluate()
    assert len(grid.epoch_comm) == 2 and all(r["bytes"] == 0 and r["eval_bytes"] == 0 for r in grid.epoch_comm)


@pytest.mark.parametrize("model", [dict(model="gcn"), dict(model="gat", heads=2, attn_dropout=0.5)])
def test_a_reordered_graph_trains_by_its_original_ids_on_one_process(model):
    """Dropout draws by the original vertex ids (`Layout.set_vertex_order`), GAT's attention dropout too (an
    edge by its original row and column), so the one-process run on a reordered graph is the run on the
    original graph up to summation order."""
    graph = random_graph(n=40)
    config = TrainConfig(epochs=1, hidden=6, dropout=0.5, **model)
    operator = "gat" if config.model == "gat" else "gcn"
    reordered = reorder_graph(graph, "random", 2, seed=3)
    original = Trainer(config, graph, LocalSpMM(operator_matrix(operator, graph.adj)))
    trainer = Trainer(config, reordered, LocalSpMM(operator_matrix(operator, reordered.adj)))
    assert trainer.layout.row_ids(torch.device("cpu")).tolist() == list(reordered.meta["reorder_order"])
    with torch.random.fork_rng():
        assert trainer.train_step(1) == pytest.approx(original.train_step(1), rel=1e-5)
