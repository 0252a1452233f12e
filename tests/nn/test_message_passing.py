"""Your own message-passing layer (`gridgnn.nn.message_passing`): the same layer written on PyG's base and on
gridgnn's gives equal outputs and gradients (within 1e-5), in one process and on 1D and 1.5D grids, for ``sum``,
``mean`` and ``max`` (with ties: integer rows whose messages tie at a row's maximum, the gradient split evenly
among them, as torch's ``scatter_reduce`` and so PyG do), and a layer separable over feature columns on 2D and
3D grids too (each rank's block of rows and columns); a message of the wrong shape, and a layer that is not
separable on a grid that splits feature columns, are refused with one clear line."""

from __future__ import annotations

import functools

import message_workers as mw
import numpy as np
import pytest
import torch

import gridgnn
from gridgnn.errors import ConfigError
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.layout import LocalLayout
from gridgnn.nn.message_passing import MessagePassing, aggregate_messages
from gridgnn.spmm.local import LocalSpMM

CASES = [dict(algo="1d", aggr="sum", integer=False, seed=1), dict(algo="1d", aggr="max", integer=True, seed=2),
         dict(algo="1.5d", replication=2, aggr="mean", integer=False, seed=3),
         dict(algo="1.5d", replication=2, aggr="max", integer=True, seed=4),
         # a separable layer on the grids that split feature columns (5 columns: blocks of 3 and 2, 2 and 3)
         dict(algo="2d", grid="2x2", aggr="sum", integer=False, seed=6, layer="gate"),
         dict(algo="3d", grid="2x2x1", aggr="max", integer=False, seed=7, layer="gate"),
         dict(algo="3d", grid="1x1x4", aggr="mean", integer=False, seed=8, layer="gate")]
REFUSED = dict(algo="2d", grid="2x2", aggr="sum", integer=False, seed=9)  # EdgeMLP's message needs whole rows


def _pyg(case: dict):
    """PyG's output, input gradient and parameter gradients of the whole graph, for ``case``."""
    adj, x, edge_attr, weights = mw.problem(case["seed"], case["aggr"], case["integer"])
    layer = mw.layer_for(case)
    pyg = mw.pyg_edge_gate(layer) if case.get("layer") == "gate" else mw.pyg_edge_mlp(layer)
    weights = mw.output_weights(case, x, weights)  # as the worker weighs the output
    coo = adj.tocoo()
    edge_index = torch.from_numpy(np.vstack([coo.col, coo.row]).astype(np.int64))  # src -> dst; CSR order kept
    xt = torch.from_numpy(x).requires_grad_(True)
    out = pyg(xt, edge_index, torch.from_numpy(edge_attr))
    (out * torch.from_numpy(weights)).sum().backward()
    return out.detach().numpy(), xt.grad.numpy(), [mw.grad_of(p).numpy() for p in layer.parameters()]


@functools.cache
def _grid(world: int) -> list[list[dict]]:
    return run_workers(mw.grid_worker, world, [*CASES, REFUSED], timeout_s=120)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['algo']}-{c['aggr']}" for c in CASES])
def test_a_user_layer_equals_the_same_layer_on_pyg_on_a_grid(case):
    out, grad_x, grads = _pyg(case)
    per_rank = _grid(4)
    index = CASES.index(case)
    covered = np.zeros(out.shape[0], dtype=int)
    for rank in per_rank:
        mine = rank[index]
        (r0, r1), (o0, o1), (c0, c1) = mine["rows"], mine["cols"], mine["in_cols"]
        covered[r0:r1] += 1
        np.testing.assert_allclose(mine["out"], out[r0:r1, o0:o1], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(mine["grad_x"], grad_x[r0:r1, c0:c1], rtol=1e-5, atol=1e-5)
        for got, want in zip(mine["grads"], grads, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert covered.min() >= 1  # every row checked (1.5D: on each replica)
    if case["integer"]:
        assert sum(rank[index]["ties"] for rank in per_rank) > 0  # the max cases do exercise ties


def test_a_user_layer_equals_pyg_in_one_process():
    case = dict(aggr="mean", integer=False, seed=5)
    adj, x, edge_attr, weights = mw.problem(case["seed"], case["aggr"], case["integer"])
    layout = LocalLayout(LocalSpMM(adj), "sum")
    layout.set_edge_features(edge_attr)
    got = mw.run_layer(mw.EdgeMLP(5, 2, 4, "mean"), layout, torch.from_numpy(x), torch.from_numpy(weights))
    out, grad_x, grads = _pyg(case)
    np.testing.assert_allclose(got[0].numpy(), out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1].numpy(), grad_x, rtol=1e-5, atol=1e-5)
    for mine, want in zip(got[2], grads, strict=True):
        np.testing.assert_allclose(mine.numpy(), want, rtol=1e-5, atol=1e-5)


def test_max_splits_a_rows_gradient_evenly_among_tied_messages_and_gives_zero_to_an_empty_row():
    messages = torch.tensor([[1.0], [3.0], [3.0], [2.0], [3.0]], requires_grad=True)
    index = torch.tensor([0, 0, 0, 1, 1])
    out = aggregate_messages(messages, index, 3, "max")
    assert out.detach().ravel().tolist() == [3.0, 3.0, 0.0]
    out.sum().backward()
    assert messages.grad.ravel().tolist() == [0.0, 0.5, 0.5, 0.0, 1.0]


class _WrongShape(MessagePassing):
    def message(self, x_i, x_j, edge_attr):
        return x_j[:1]


def test_a_message_of_the_wrong_shape_is_one_clear_value_error():
    adj, x, edge_attr, _ = mw.problem(1, "sum", False)
    layout = LocalLayout(LocalSpMM(adj), "sum")
    with pytest.raises(ValueError, match=r"_WrongShape.message must return one row per edge"):
        _WrongShape()(torch.from_numpy(x), layout)


def test_a_layer_that_is_not_separable_is_refused_on_2d_by_every_rank_with_one_line():
    for rank in _grid(4):
        refusal = rank[-1]["refused"]
        assert "EdgeMLP needs whole rows" in refusal and "1d and 1.5d grids only" in refusal
        assert "\n" not in refusal


def test_a_message_layout_needs_the_adjacency_unnormalized():
    adj, _, edge_attr, _ = mw.problem(1, "sum", False)
    with pytest.raises(ConfigError, match="pass normalize=False"):
        gridgnn.grid_aggregation(adj, algo="1d", edge_features=edge_attr)
