"""MeshGraphNet's processor (Pfaff et al., ICLR 2021): edge features updated per layer, then the vertices.

Layer k holds an edge state e (one row per edge, where the edge lives) and the vertex rows x:

    e'_ji = MLP_e([e_ji, x_i, x_j])        (+ e_ji when the widths agree)
    x'_i  = MLP_x([x_i, Σ_{j → i} e'_ji])  (+ x_i when the widths agree)

with ``MLP(z) = LayerNorm(ReLU(z W1 + b1) W2 + b2)``, ``hidden`` units wide inside (no LayerNorm on the last
layer's vertex MLP, which outputs the targets). The first layer's edge state is the graph's edge features (d wide);
each layer's new edge state is ``hidden`` wide and goes to the next layer (`MeshGraphNet.apply_layer`); the
last layer's vertex MLP outputs the targets. Every product is local to the rows or edges of a process
(`gridgnn.nn.message_passing`: 1D and 1.5D grids; the halo rows of x_j move by one all-to-all per layer).
No PyG layer is the same, so a model file saves and loads but `to_pyg` is refused.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gridgnn.config import MAX_EDGE_FEATURES
from gridgnn.nn.layout import Layout, as_layout
from gridgnn.nn.message_passing import MessagePassing, aggregate_messages, require_edge_features
from gridgnn.nn.model_config import integer_field
from gridgnn.nn.stack import LayerStack, as_dense
from gridgnn.sparse.csr import SparseBlock


def _mlp(in_channels: int, hidden: int, out_channels: int, generator: torch.Generator | None,
         norm: bool = True) -> nn.Sequential:
    """Linear(in, hidden)-ReLU-Linear(hidden, out) (then LayerNorm with ``norm``, as MeshGraphNet's MLPs but its
    decoder's), Glorot-initialized from ``generator`` (every process alike), zero biases. The hidden width is the
    model's, never the output's: a 1-wide ReLU before a regression's one output would die and leave a
    constant."""
    layers = [nn.Linear(in_channels, hidden), nn.ReLU(), nn.Linear(hidden, out_channels)]
    mlp = nn.Sequential(*layers, *([nn.LayerNorm(out_channels)] if norm else []))
    for linear in (mlp[0], mlp[2]):
        nn.init.xavier_uniform_(linear.weight, generator=generator)
        nn.init.zeros_(linear.bias)
    return mlp


class EdgeUpdateLayer(MessagePassing):
    """One processor layer: vertex rows ``in_channels`` -> ``out_channels``, edge state ``edge_in`` ->
    ``edge_out``."""

    order = "aggregate-first"

    def __init__(self, in_channels: int, out_channels: int, *, edge_in: int, edge_out: int,
                 generator: torch.Generator | None = None, last: bool = False):
        super().__init__(aggr="sum")
        self.in_channels, self.out_channels, self.edge_in, self.edge_out = in_channels, out_channels, edge_in, edge_out
        self.edge_mlp = _mlp(edge_in + 2 * in_channels, edge_out, edge_out, generator)
        self.node_mlp = _mlp(in_channels + edge_out, edge_out, out_channels, generator, norm=not last)

    def edge_values(self, width: int, edge_features: int) -> int:
        """Per edge: the concatenation [e, x_i, x_j] the first Linear keeps (edge_in + 2 w; the gathered rows
        themselves are freed), the ReLU's output and the LayerNorm's input and output (the new state): 3 hidden."""
        return self.edge_in + 2 * width + 3 * self.edge_out

    def edge_temporaries(self, width: int, edge_features: int) -> int:
        """Per edge while the layer runs: the gathered x_i and x_j before their concatenation (2 w) and one
        gradient of the hidden width in backward. With `edge_values`, measured on mesh:nodes=60000, 3 layers of
        64 on 1d P = 2 (benchmarks/edge_models.py, results/edge_models/)."""
        return 2 * width + self.edge_out

    def forward(self, h: Tensor | SparseBlock, layout: Layout, edge_state: Tensor | None = None) -> tuple:
        """h: (m, in_channels); edge_state: (E, edge_in) (None: the layout's edge features). Returns the new
        rows (m, out_channels) and edge state (E, edge_out). Collective as ``layout.source_rows``."""
        x = as_dense(h)
        layout = as_layout(layout, self.operator, x.shape[0])
        edges = layout.edges()
        e = edges.attr if edge_state is None else edge_state
        if e is None:
            raise ValueError("MeshGraphNet needs edge features: the layout's edges carry none")
        sources = layout.source_rows(x)
        new_e = self.edge_mlp(torch.cat([e, x[edges.dst], sources[edges.src]], dim=1))
        if self.edge_in == self.edge_out:
            new_e = new_e + e
        summed = aggregate_messages(new_e, edges.dst, edges.num_rows, self.aggr)
        new_x = self.node_mlp(torch.cat([x, summed], dim=1))
        if self.in_channels == self.out_channels:
            new_x = new_x + x
        return new_x, new_e

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, edges {self.edge_in} -> {self.edge_out}"


class MeshGraphNet(LayerStack):
    """``num_layers`` `EdgeUpdateLayer`s over ``edge_dim`` edge features; the edge state is ``hidden`` wide
    after the first layer.

    Model file: the shared fields and ``edge_dim``; state ``layers.{k}.edge_mlp.{0,2}.{weight,bias}`` and
    ``layers.{k}.node_mlp.{0,2}.{weight,bias}`` (torch ``Linear`` layout: weight (out, in))."""

    operator = "sum"
    kind = "meshgraphnet"
    label = "MeshGraphNet"
    edge_inputs = True
    file_fields = ("edge_dim",)

    def file_config(self) -> dict:
        return {**self.stack_config(), "edge_dim": int(self.layers[0].edge_in)}

    @classmethod
    def check_file_config(cls, config: dict) -> int:
        integer_field(config, "edge_dim", 1, MAX_EDGE_FEATURES)
        return 1

    @classmethod
    def from_file_config(cls, config: dict) -> MeshGraphNet:
        args, kwargs = cls.stack_arguments(config)
        return cls(*args, edge_dim=int(config["edge_dim"]), **kwargs)

    @classmethod
    def from_config(cls, config, in_channels: int, out_channels: int, edge_dim: int = 0) -> MeshGraphNet:
        return cls(in_channels, config.hidden, out_channels, edge_dim=edge_dim, **cls.common_options(config))

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, *, edge_dim: int,
                 num_layers: int = 2, dropout: float = 0.5, order: str = "auto", seed: int = 0):
        require_edge_features(self.kind, edge_dim)
        self._edge_widths = iter([edge_dim] + [hidden_channels] * num_layers)
        self._hidden, self._remaining = hidden_channels, num_layers
        super().__init__(in_channels, hidden_channels, out_channels, num_layers=num_layers, dropout=dropout,
                         order=order, seed=seed)
        del self._edge_widths, self._remaining

    def make_layer(self, in_channels, out_channels, *, order, generator):
        self._remaining -= 1
        return EdgeUpdateLayer(in_channels, out_channels, edge_in=next(self._edge_widths), edge_out=self._hidden,
                               generator=generator, last=self._remaining == 0)

    def apply_layer(self, index: int, layer: nn.Module, h, layout: Layout, stream: dict) -> Tensor:
        """The layer with the edge state the previous one left (the edge features first); the last layer's is
        dropped, so that no forward keeps another's."""
        out, edge_state = layer(h, layout, None if index == 0 else self._edge_state)
        self._edge_state = edge_state if index + 1 < len(self.layers) else None
        return out

    _edge_state: Tensor | None = None
