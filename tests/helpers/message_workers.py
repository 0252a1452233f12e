"""Worker-side code of the message-passing tests (imported by forked processes): the same layer written on PyG's
``MessagePassing`` and on gridgnn's, compared on a grid."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

import gridgnn
from gridgnn.errors import ConfigError
from gridgnn.nn.message_passing import MessagePassing


class EdgeMLP(MessagePassing):
    """A user's layer on gridgnn's base: message ``MLP([x_i, x_j - x_i, e_ij])``, aggregated by ``aggr``, then
    ``update = aggr + x W_root``."""

    def __init__(self, width: int, edge_dim: int, out: int, aggr: str, seed: int = 0, shift: bool = False):
        super().__init__(aggr=aggr)
        self.shift = shift  # message x_j W + e_ij[0]: integer inputs then tie often under max
        torch.manual_seed(seed)
        self.mlp = nn.Sequential(nn.Linear(2 * width + edge_dim, out), nn.Tanh(), nn.Linear(out, out))
        self.root = nn.Linear(width, out, bias=False)

    def message(self, x_i, x_j, edge_attr):
        return message_of(self, x_i, x_j, edge_attr)

    def update(self, aggr_out, x):
        return aggr_out + self.root(x)


def message_of(layer: EdgeMLP, x_i, x_j, edge_attr):
    """The layer's message (one definition for both bases)."""
    if layer.shift:
        return x_j @ torch.ones(x_j.shape[1], layer.root.out_features) + edge_attr[:, :1] * layer.root.weight.sum()
    return layer.mlp(torch.cat([x_i, x_j - x_i, edge_attr], dim=1))


class EdgeGate(MessagePassing):
    """A separable user layer: message ``x_j · sigmoid(e_ij g + b)`` (column c of the message reads column c of
    x_j only), aggregated by ``aggr``, then ``update = aggr + x``: it runs on 2D and 3D too, each process on its
    columns, its gate's gradient summed over the world by ``reduce_gradients``."""

    column_separable = True
    reads_destination = False

    def __init__(self, edge_dim: int, aggr: str, seed: int = 0):
        super().__init__(aggr=aggr)
        torch.manual_seed(seed)
        self.gate = nn.Linear(edge_dim, 1)

    def message(self, x_i, x_j, edge_attr):
        return x_j * torch.sigmoid(self.gate(edge_attr))

    def update(self, aggr_out, x):
        return aggr_out + x


def pyg_edge_gate(layer: EdgeGate):
    """The same separable layer on PyG's ``MessagePassing``, holding ``layer``'s gate."""
    from torch_geometric.nn import MessagePassing as PygMessagePassing

    class PygEdgeGate(PygMessagePassing):
        def __init__(self):
            super().__init__(aggr=layer.aggr)
            self.gate = layer.gate

        def forward(self, x, edge_index, edge_attr):
            return self.propagate(edge_index, x=x, edge_attr=edge_attr) + x

        def message(self, x_j, edge_attr):
            return x_j * torch.sigmoid(self.gate(edge_attr))

    return PygEdgeGate()


def layer_for(case: dict):
    """The gridgnn layer of a test case (``layer``: ``gate`` for `EdgeGate`, else `EdgeMLP`)."""
    if case.get("layer") == "gate":
        return EdgeGate(2, case["aggr"])
    return EdgeMLP(5, 2, 4, case["aggr"], shift=case["integer"])


def output_weights(case: dict, x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The (n, width of the layer's output) weights the tests sum the output with: the problem's for `EdgeMLP`
    (4 wide), ``1 + x`` for `EdgeGate` (its output is as wide as x)."""
    return np.ones_like(x) + x if case.get("layer") == "gate" else weights


def pyg_edge_mlp(layer: EdgeMLP):
    """The same layer written on PyG's ``MessagePassing``, holding ``layer``'s modules."""
    from torch_geometric.nn import MessagePassing as PygMessagePassing

    class PygEdgeMLP(PygMessagePassing):
        def __init__(self):
            super().__init__(aggr=layer.aggr)
            self.mlp, self.root = layer.mlp, layer.root

        def forward(self, x, edge_index, edge_attr):
            return self.propagate(edge_index, x=x, edge_attr=edge_attr) + self.root(x)

        def message(self, x_i, x_j, edge_attr):
            return message_of(layer, x_i, x_j, edge_attr)

    return PygEdgeMLP()


def problem(seed: int, aggr: str, integer: bool):
    """(adjacency (n, n) canonical CSR, features (n, 5), edge features (E, 2), output weights (n, 4)): a random
    directed graph with isolated rows; ``integer`` features make ties for ``max``."""
    rng = np.random.default_rng(seed)
    n = 37
    adj = sp.random(n, n, density=0.12, random_state=seed, format="csr", dtype=np.float32)
    adj.data[:] = 1.0
    adj.setdiag(0)
    adj.eliminate_zeros()
    adj.sum_duplicates()
    x = rng.integers(-2, 3, (n, 5)).astype(np.float32) if integer else rng.standard_normal((n, 5)).astype(np.float32)
    edge_attr = (rng.integers(0, 2, (adj.nnz, 2)) if integer else rng.standard_normal((adj.nnz, 2))).astype(np.float32)
    weights = rng.standard_normal((n, 4)).astype(np.float32)
    return adj, x, edge_attr, weights


def run_layer(layer: EdgeMLP, agg, x: torch.Tensor, weights: torch.Tensor):
    """Output rows, the input rows' gradient and every parameter's gradient of ``sum(out * weights)``."""
    x = x.clone().requires_grad_(True)
    out = layer(x, agg)
    (out * weights).sum().backward()
    return out.detach(), x.grad.detach(), [grad_of(p) for p in layer.parameters()]


def grad_of(p: torch.Tensor) -> torch.Tensor:
    """A parameter's gradient (zeros for one its forward never read)."""
    return p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)


def grid_worker(rank: int, world_size: int, cases: list[dict]) -> list[dict]:
    """Per case (``algo``, ``replication`` or ``grid``, ``aggr``, ``integer``, ``layer``): this rank's block (rows
    and, on 2D/3D, feature columns) of the layer's output and input gradient, and the reduced parameter gradients,
    on the grid; a case whose layer the grid refuses records the refusal's message instead."""
    out = []
    for case in cases:
        adj, x, edge_attr, weights = problem(case["seed"], case["aggr"], case["integer"])
        agg = gridgnn.grid_aggregation(adj, algo=case["algo"], replication=case.get("replication", 1),
                                       grid=case.get("grid"), normalize=False, edge_features=edge_attr)
        layer = layer_for(case)
        r0, r1 = agg.row_range
        c0, c1 = agg.col_range(x.shape[1])
        weights = output_weights(case, x, weights)
        o0, o1 = agg.col_range(weights.shape[1])
        try:
            rows, grad_x, grads = run_layer(layer, agg, torch.from_numpy(x[r0:r1, c0:c1]),
                                            torch.from_numpy(weights[r0:r1, o0:o1]))
        except ConfigError as error:
            out.append({"refused": str(error)})
            continue
        params = list(layer.parameters())
        agg.reduce_gradients(params)
        ties = 0
        if case.get("layer") != "gate":
            edges = agg.edges()
            messages = message_of(layer, torch.from_numpy(x[r0:r1])[edges.dst],
                                  agg.source_rows(torch.from_numpy(x[r0:r1]))[edges.src], edges.attr).detach()
            best = torch.zeros(r1 - r0, 4).index_reduce(0, edges.dst, messages, "amax", include_self=False)
            at_max = (messages == best[edges.dst]).to(torch.int64)  # (E, 4): the messages equal to their row's max
            per_row = torch.zeros(r1 - r0, 4, dtype=torch.int64).index_add(0, edges.dst, at_max)
            ties = int((per_row > 1).sum())  # (row, column) pairs whose maximum more than one message reaches
        out.append({"rows": (r0, r1), "cols": (o0, o1), "in_cols": (c0, c1), "out": rows.numpy(),
                    "grad_x": grad_x.numpy(), "ties": ties, "grads": [grad_of(p).numpy() for p in params]})
    return out
