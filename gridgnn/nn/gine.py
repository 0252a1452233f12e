"""GINE, as PyG's ``GINEConv`` with edge features: ``out_i = MLP((1 + ε) x_i + Σ_{j ∈ N(i)} ReLU(x_j + W_e e_ij
+ b_e))``.

``MLP(z) = ReLU(z W1 + b1) W2 + b2`` with W1 (in, out) and W2 (out, out) (a layer norm after the first linear with
``--gin-norm layer``), as `gridgnn.nn.gin`; W_e (d, in) and b_e (in,) map the d edge features onto the layer's input
width (PyG's ``GINEConv(..., edge_dim=d)`` lin). The message is not linear, so it runs where the edges live
(`gridgnn.nn.message_passing.MessagePassing`, the halo rows moved by one all-to-all), at the layer's input width;
the order is aggregate-first. It is separable over feature columns, so it runs on every grid (on 2D process (i, j)
runs block row i's edges on feature columns j, on 3D process (i, j, l) the edges into its rows S[i][l], reading
W_e's and b_e's columns j; their gradients, zero elsewhere, are summed on the world).
A graph without edge features cannot train it (`gridgnn.nn.models.check_edge_inputs`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gridgnn.config import MAX_EDGE_FEATURES
from gridgnn.nn.gin import GIN, add_gin_mlp, gin_mlp_tail, load_mlp, pyg_mlp
from gridgnn.nn.layout import Layout, as_layout
from gridgnn.nn.message_passing import MessagePassing, require_edge_features
from gridgnn.nn.model_config import integer_field
from gridgnn.nn.stack import LayerStack, as_dense, glorot
from gridgnn.sparse.csr import SparseBlock


class GINELayer(MessagePassing):
    """One GINE layer over ``edge_dim`` edge features; ``eps`` the initial ε, trainable with ``train_eps``."""

    order = "aggregate-first"
    column_separable = True  # column c of ReLU(x_j + e W_e + b_e) reads column c of x_j only
    reads_destination = False

    def __init__(self, in_channels: int, out_channels: int, *, edge_dim: int, eps: float = 0.0,
                 train_eps: bool = False, norm: str = "none", generator: torch.Generator | None = None):
        super().__init__(aggr="sum")
        self.in_channels, self.out_channels, self.edge_dim = in_channels, out_channels, edge_dim
        self.edge_weight = glorot(edge_dim, in_channels, generator)
        self.edge_bias = nn.Parameter(torch.zeros(in_channels))
        add_gin_mlp(self, in_channels, out_channels, eps, train_eps, generator, norm)
        self._columns = (0, in_channels)  # the feature columns of x this process holds (2D: its block)

    def edge_values(self, width: int, edge_features: int) -> int:
        """Per edge, for the memory model: the ReLU's output, which its backward reads (the sum before it and
        the gathered rows are freed)."""
        return width

    def message(self, x_i: Tensor | None, x_j: Tensor, edge_attr: Tensor | None) -> Tensor:
        if edge_attr is None:
            raise ValueError("GINE needs edge features: the layout's edges carry none")
        c0, c1 = self._columns
        return torch.relu(x_j + edge_attr @ self.edge_weight[:, c0:c1] + self.edge_bias[c0:c1])

    def forward(self, h: Tensor | SparseBlock, layout: Layout) -> Tensor:
        """h: (m, in_channels) dense or a sparse feature block; returns (m, out_channels)."""
        x = as_dense(h)
        layout = as_layout(layout, self.operator, x.shape[0])
        self._columns = tuple(layout.col_range(self.in_channels))
        z = layout.linear(self.propagate(x, layout) + (1 + self.eps) * x, self.weight1)
        return gin_mlp_tail(self, z, layout)

    def extra_repr(self) -> str:
        trainable = isinstance(self.eps, nn.Parameter)
        return (f"{self.in_channels}, {self.out_channels}, edge_dim={self.edge_dim}, train_eps={trainable}, "
                f"norm={self.norm}")


class GINE(GIN):
    """GINE of ``num_layers`` `GINELayer`s over ``edge_dim`` edge features (dropout and output:
    `gridgnn.nn.stack.LayerStack`; ε's options and their model-file fields as `gridgnn.nn.gin.GIN`'s).

    Model file: the shared fields, ``eps``, ``train_eps``, ``norm`` and ``edge_dim``; state
    ``layers.{k}.edge_weight`` (d, in), ``edge_bias`` (in,), ``weight1`` (in, out), ``bias1``, (``norm_weight``,
    ``norm_bias``,) ``weight2`` (out, out), ``bias2``, ``eps`` (1,). PyG: ``GINEConv(Sequential(Linear(in, out), ReLU(),
    Linear(out, out)), eps, train_eps, edge_dim=d)`` (the norm as GIN's) with ``lin.weight = W_eᵀ``,
    ``lin.bias = b_e``."""

    operator = "sum"
    kind = "gine"
    label = "GINE"
    edge_inputs = True
    file_fields = ("eps", "train_eps", "norm", "edge_dim")

    def file_config(self) -> dict:
        first = self.layers[0]
        return {**self.stack_config(), "eps": float(first.eps.detach()[0]),
                "train_eps": isinstance(first.eps, nn.Parameter), "norm": first.norm, "edge_dim": int(first.edge_dim)}

    @classmethod
    def check_file_config(cls, config: dict) -> int:
        GIN.check_file_config(config)  # eps, train_eps and norm, as GIN's (file_options too: inherited)
        integer_field(config, "edge_dim", 1, MAX_EDGE_FEATURES)
        return 1

    @classmethod
    def from_file_config(cls, config: dict) -> GINE:
        args, kwargs = cls.stack_arguments(config)
        return cls(*args, edge_dim=int(config["edge_dim"]), eps=float(config["eps"]),
                   train_eps=bool(config["train_eps"]), norm=str(config.get("norm", "none")), **kwargs)

    def pyg_convs(self) -> list[nn.Module]:
        from torch_geometric.nn import GINEConv

        convs = []
        for layer in self.layers:
            conv = GINEConv(pyg_mlp(layer), eps=float(layer.eps.detach()[0]),
                            train_eps=isinstance(layer.eps, nn.Parameter), edge_dim=layer.edge_dim)
            load_mlp(conv.nn, layer)
            with torch.no_grad():
                conv.lin.weight.copy_(layer.edge_weight.detach().T)
                conv.lin.bias.copy_(layer.edge_bias.detach())
            convs.append(conv)
        return convs

    @classmethod
    def from_config(cls, config, in_channels: int, out_channels: int, edge_dim: int = 0) -> GINE:
        return cls(in_channels, config.hidden, out_channels, edge_dim=edge_dim, eps=config.gin_eps,
                   train_eps=config.gin_train_eps, norm=config.gin_norm,
                   **cls.common_options(config))

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, *, edge_dim: int,
                 num_layers: int = 2, dropout: float = 0.5, order: str = "auto", seed: int = 0, eps: float = 0.0,
                 train_eps: bool = False, norm: str = "none"):
        require_edge_features(self.kind, edge_dim)
        LayerStack.__init__(self, in_channels, hidden_channels, out_channels, num_layers=num_layers,
                            dropout=dropout, order=order, seed=seed, edge_dim=edge_dim, eps=eps, train_eps=train_eps,
                            norm=norm)

    def make_layer(self, in_channels, out_channels, *, order, generator, edge_dim=1, eps=0.0, train_eps=False,
                   norm="none"):
        return GINELayer(in_channels, out_channels, edge_dim=edge_dim, eps=eps, train_eps=train_eps, norm=norm,
                         generator=generator)
