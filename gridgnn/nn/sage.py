"""GraphSAGE with the mean aggregator and a root weight, as PyG's ``SAGEConv(aggr="mean", root_weight=True)``.

One layer: ``out_i = W_neighᵀ · mean_{j ∈ N(i)} h_j + W_rootᵀ · h_i + b`` (an isolated vertex aggregates
zeros), the mean being the ``mean`` operator D_in⁻¹ A (backward: its transpose). With ``normalize`` every
output row is divided by its L2 norm (at least 1e-12), as ``normalize=True``. The root term is local: it adds
no SpMM, only a second product with a weight (and on a column-split layout that product's column exchange).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gridgnn.config import resolve_order
from gridgnn.nn.layout import Layout, as_layout
from gridgnn.nn.model_config import flag_field
from gridgnn.nn.stack import LayerStack, as_dense, glorot
from gridgnn.sparse.csr import SparseBlock

NORM_EPS = 1e-12
"""The smallest row norm divided by (``torch.nn.functional.normalize``'s default)."""


class SAGELayer(nn.Module):
    """W_neigh, W_root of shape (in_channels, out_channels), bias of shape (out_channels,).

    Transform-first (``mean(H W_neigh)``) or aggregate-first (``mean(H) W_neigh``): the same numbers up to
    rounding, chosen by width as for GCN.
    """

    operator = "mean"

    def __init__(self, in_channels: int, out_channels: int, *, order: str = "auto", normalize: bool = False,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.in_channels, self.out_channels, self.normalize = in_channels, out_channels, normalize
        self.order = resolve_order(order, in_channels, out_channels)
        self.weight_neigh = glorot(in_channels, out_channels, generator)
        self.weight_root = glorot(in_channels, out_channels, generator)
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, h: Tensor | SparseBlock, layout: Layout) -> Tensor:
        """h: dense (m, in_channels block) or a sparse feature block; returns (m, out_channels block).
        ``layout``: a `Layout`, or a plain single-process callable ``x -> M x``."""
        layout = as_layout(layout, self.operator, h.shape[0])
        if self.order == "transform-first":
            neigh = layout.aggregate(layout.linear(h, self.weight_neigh))
        else:
            neigh = layout.linear(layout.aggregate(as_dense(h)), self.weight_neigh)
        out = layout.add_bias(neigh + layout.linear(h, self.weight_root), self.bias)
        if not self.normalize:
            return out
        # clamp before the root: sqrt's gradient at an all-zero row would be inf · 0 = NaN
        norm = layout.row_sum(out * out).clamp_min(NORM_EPS * NORM_EPS).sqrt()
        return out / norm

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, order={self.order}, normalize={self.normalize}"


class SAGE(LayerStack):
    """GraphSAGE-mean of ``num_layers`` `SAGELayer`s (dropout and output: `gridgnn.nn.stack.LayerStack`).

    Model file: the shared fields and ``normalize``; state ``layers.{k}.weight_neigh``, ``weight_root`` (in,
    out), ``bias`` (out,). PyG: ``SAGEConv(in, out, aggr="mean", root_weight=True, normalize=...)`` with
    ``lin_l.weight = W_neighᵀ``, ``lin_l.bias = b``, ``lin_r.weight = W_rootᵀ``."""

    operator = "mean"
    kind = "sage"
    label = "GraphSAGE-mean"
    file_fields = ("normalize",)

    def file_config(self) -> dict:
        return {**self.stack_config(), "normalize": bool(self.layers[0].normalize)}

    @classmethod
    def check_file_config(cls, config: dict) -> int:
        flag_field(config, "normalize")
        return 1

    @classmethod
    def from_file_config(cls, config: dict) -> SAGE:
        args, kwargs = cls.stack_arguments(config)
        return cls(*args, normalize=bool(config["normalize"]), **kwargs)

    @staticmethod
    def file_options(options) -> dict:
        return {"normalize": bool(options.sage_normalize)}

    @staticmethod
    def options_from_file(config: dict) -> dict:
        return {"sage_normalize": bool(config["normalize"])}

    def pyg_convs(self) -> list[nn.Module]:
        from torch_geometric.nn import SAGEConv

        convs = []
        for layer in self.layers:
            conv = SAGEConv(layer.in_channels, layer.out_channels, aggr="mean", root_weight=True,
                            normalize=layer.normalize)
            with torch.no_grad():
                conv.lin_l.weight.copy_(layer.weight_neigh.detach().T)
                conv.lin_l.bias.copy_(layer.bias.detach())
                conv.lin_r.weight.copy_(layer.weight_root.detach().T)
            convs.append(conv)
        return convs

    @classmethod
    def from_config(cls, config, in_channels: int, out_channels: int) -> SAGE:
        return cls(in_channels, config.hidden, out_channels, normalize=config.sage_normalize,
                   **cls.common_options(config))

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, *, num_layers: int = 2,
                 dropout: float = 0.5, order: str = "auto", seed: int = 0, normalize: bool = False):
        super().__init__(in_channels, hidden_channels, out_channels, num_layers=num_layers, dropout=dropout,
                         order=order, seed=seed, normalize=normalize)

    def make_layer(self, in_channels, out_channels, *, order, generator, normalize=False):
        return SAGELayer(in_channels, out_channels, order=order, normalize=normalize, generator=generator)
