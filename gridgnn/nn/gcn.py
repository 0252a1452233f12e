"""The GCN model (Kipf & Welling) as single-device math over a `gridgnn.nn.layout.Layout` (docs/architecture.md §1).

One layer: ``Z = Â H W + b`` with the ``gcn`` operator Â = D^-1/2 (A + I) D^-1/2. The layout decides where
rows and columns live; nothing here depends on the algorithm.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from gridgnn.config import resolve_order
from gridgnn.nn.layout import Layout, as_layout, global_ids
from gridgnn.nn.model_config import flag_field
from gridgnn.nn.stack import LayerStack, as_dense, glorot
from gridgnn.sparse.csr import SparseBlock

__all__ = ["GCN", "Aggregation", "GCNLayer", "global_ids", "resolve_order"]

Aggregation = Callable[[Tensor], Tensor]
"""A plain single-process aggregation ``x -> M x`` (models also take a `gridgnn.nn.layout.Layout`)."""


class GCNLayer(nn.Module):
    """``Z = Â H W + b`` with W of shape (in_channels, out_channels) and b of shape (out_channels,).

    The product order is fixed at construction (see `resolve_order`). Glorot-uniform W drawn from
    ``generator``; zero bias. Autograd keeps ``Â H`` (aggregate-first) for the weight gradient.
    """

    operator = "gcn"

    def __init__(self, in_channels: int, out_channels: int, *, order: str = "auto", bias: bool = True,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.order = resolve_order(order, in_channels, out_channels)
        self.weight = glorot(in_channels, out_channels, generator)
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None

    def forward(self, h: Tensor | SparseBlock, layout: Layout) -> Tensor:
        """h: dense (m, in_channels block) or a sparse feature block; returns (m, out_channels block).
        ``layout``: a `Layout`, or a plain single-process callable ``x -> M x``."""
        layout = as_layout(layout, self.operator, h.shape[0])
        if self.order == "transform-first":
            z = layout.aggregate(layout.linear(h, self.weight))
        else:
            z = layout.linear(layout.aggregate(as_dense(h)), self.weight)
        return z if self.bias is None else layout.add_bias(z, self.bias)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, order={self.order}, bias={self.bias is not None}"


class GCN(LayerStack):
    """A GCN of ``num_layers`` `GCNLayer`s (see `gridgnn.nn.stack.LayerStack` for dropout and output).

    Model file: the shared fields and ``bias``; state ``layers.{k}.weight`` (in, out), ``layers.{k}.bias``
    (out,). PyG: layer k is ``GCNConv(in, out, bias=...)`` with ``lin.weight = W_kᵀ`` and ``bias = b_k``."""

    operator = "gcn"
    kind = "gcn"
    label = "GCN"
    file_fields = ("bias",)

    def file_config(self) -> dict:
        return {**self.stack_config(), "bias": self.layers[0].bias is not None}

    @classmethod
    def check_file_config(cls, config: dict) -> int:
        flag_field(config, "bias")
        return 1

    @classmethod
    def from_file_config(cls, config: dict) -> GCN:
        args, kwargs = cls.stack_arguments(config)
        return cls(*args, bias=config["bias"], **kwargs)

    @staticmethod
    def file_options(options) -> dict:
        return {"bias": True}  # a trained GCN always has its bias

    def pyg_convs(self) -> list[nn.Module]:
        from torch_geometric.nn import GCNConv

        convs = []
        for layer in self.layers:
            conv = GCNConv(layer.in_channels, layer.out_channels, bias=layer.bias is not None)
            with torch.no_grad():
                conv.lin.weight.copy_(layer.weight.detach().T)
                if layer.bias is not None:
                    conv.bias.copy_(layer.bias.detach())
            convs.append(conv)
        return convs

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, *, num_layers: int = 2,
                 dropout: float = 0.5, order: str = "auto", bias: bool = True, seed: int = 0):
        super().__init__(in_channels, hidden_channels, out_channels, num_layers=num_layers, dropout=dropout,
                         order=order, seed=seed, bias=bias)

    def make_layer(self, in_channels, out_channels, *, order, generator, bias=True):
        return GCNLayer(in_channels, out_channels, order=order, bias=bias, generator=generator)
