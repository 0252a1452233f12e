"""The GCN model as single-device math over an injected aggregation (DESIGN.md §1 and §4, layer 5).

The aggregation is any callable ``agg(x) -> Â x`` (shape (m, f) -> (m, f)) with autograd, e.g.
`gridgnn.spmm.local.LocalSpMM` on one process or `gridgnn.parallel.grid_ops.GridOps` on a rank's block.
When ``agg`` also has ``linear(h, W)``, ``add_bias(z, b)`` and ``full_rows(z, width)`` (as `GridOps` does),
the products with W, the bias and the gathering of class columns before log-softmax follow its layout.
When ``agg`` has a ``row_range`` (global rows ``[start, stop)`` of the rank's block) and
``col_range(width)`` (its feature columns), dropout uses those global ids, so every layout draws the
same masks; otherwise the block is the whole matrix.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gridgnn.cost.epoch_cost import resolve_order as _resolve_order
from gridgnn.errors import ConfigError
from gridgnn.limits import MAX_LAYERS, check_weight_matrix
from gridgnn.nn.dropout import dropout, relu_dropout
from gridgnn.nn.features import SparseFeatures, sparse_linear
from gridgnn.sparse.csr import SparseBlock

Aggregation = Callable[[Tensor], Tensor]


def resolve_order(order: str, in_channels: int, out_channels: int) -> str:
    """``aggregate-first`` ((Â H) W) or ``transform-first`` (Â (H W)) for one layer.

    ``auto`` sends the narrower width through the SpMM: transform first when out < in. The cost model
    (`gridgnn.cost.epoch_cost.resolve_order`) owns the rule; this raises `ConfigError` for a bad name.
    """
    try:
        return _resolve_order(order, in_channels, out_channels)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


class GCNLayer(nn.Module):
    """``Z = Â H W + b`` with W of shape (in_channels, out_channels) and b of shape (out_channels,).

    The product order is fixed at construction (see `resolve_order`). Glorot-uniform W drawn from
    ``generator``; zero bias. Autograd keeps ``Â H`` (aggregate-first) for the weight gradient.
    """

    def __init__(self, in_channels: int, out_channels: int, *, order: str = "auto", bias: bool = True,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.order = resolve_order(order, in_channels, out_channels)
        self.weight = nn.Parameter(torch.empty(in_channels, out_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        nn.init.xavier_uniform_(self.weight, generator=generator)

    def forward(self, h: Tensor | SparseBlock, agg: Aggregation) -> Tensor:
        """h: dense (m, in_channels) or a sparse feature block; returns (m, out_channels)."""
        if self.order == "transform-first":
            hw = _linear(agg, h, self.weight)
            z = agg(hw)
        else:
            dense = h.csr.to_dense() if isinstance(h, SparseBlock) else h
            z = _linear(agg, agg(dense), self.weight)
        if self.bias is None:
            return z
        add_bias = getattr(agg, "add_bias", None)
        return add_bias(z, self.bias) if add_bias is not None else z + self.bias

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, order={self.order}, bias={self.bias is not None}"


class GCN(nn.Module):
    """A GCN of ``num_layers`` `GCNLayer`s: widths in -> hidden ... hidden -> out, ReLU between layers,
    dropout on every layer's input (the input features too, as Kipf & Welling), log-softmax output.

    ``seed`` drives both the Glorot initialization (its own generator, so every process builds identical
    weights) and the dropout masks.
    """

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, *, num_layers: int = 2,
                 dropout: float = 0.5, order: str = "auto", bias: bool = True, seed: int = 0):
        super().__init__()
        if num_layers < 1:
            raise ConfigError(f"num_layers must be at least 1, got {num_layers}")
        widths = check_model_size(in_channels, hidden_channels, out_channels, num_layers)
        generator = torch.Generator().manual_seed(seed)
        self.layers = nn.ModuleList(
            GCNLayer(w_in, w_out, order=order, bias=bias, generator=generator)
            for w_in, w_out in zip(widths[:-1], widths[1:], strict=True)
        )
        self.dropout, self.seed = dropout, seed

    def forward(self, x: Tensor | SparseFeatures, agg: Aggregation, *, epoch: int = 0) -> Tensor:
        """x: dense (m, in_channels) or `SparseFeatures`; returns log-probabilities (m, out_channels).

        ``epoch`` selects the dropout masks (ignored in eval mode).
        """
        stream = {"seed": self.seed, "epoch": epoch, "training": self.training}
        h: Tensor | SparseBlock
        if isinstance(x, SparseFeatures):
            h = x.block(self.dropout, layer=0, **stream)
        else:
            h = self._dropout(x, agg, layer=0, **stream)
        for index, layer in enumerate(self.layers):
            if index > 0:
                rows, cols = global_ids(agg, layer.in_channels, h.device)
                h = relu_dropout(h, self.dropout, layer=index, row_ids=rows, col_ids=cols, **stream)
            h = layer(h, agg)
        full_rows = getattr(agg, "full_rows", None)
        if full_rows is not None:
            h = full_rows(h, self.layers[-1].out_channels)
        return F.log_softmax(h, dim=1)

    def _dropout(self, h: Tensor, agg: Aggregation, *, layer: int, **stream) -> Tensor:
        rows, cols = global_ids(agg, self.layers[layer].in_channels, h.device)
        return dropout(h, self.dropout, layer=layer, row_ids=rows, col_ids=cols, **stream)


def check_model_size(in_channels: int, hidden_channels: int, out_channels: int, num_layers: int) -> list[int]:
    """The layer widths ``[in, hidden, ..., hidden, out]`` after checking that every weight matrix fits in a
    tensor and in this machine's memory (`ConfigError` naming it, before any allocation)."""
    if num_layers > MAX_LAYERS:
        raise ConfigError(f"num_layers must be at most {MAX_LAYERS}, got {num_layers}")
    widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
    fix = (f"lower --hidden (now {hidden_channels}) or check the dataset's feature and class counts "
           f"({in_channels}, {out_channels})")
    for index, (w_in, w_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        check_weight_matrix(w_in, w_out, f"weight matrix of layer {index + 1}", fix)
    return widths


def _linear(agg: Aggregation, h: Tensor | SparseBlock, weight: Tensor) -> Tensor:
    """``h @ W`` in the layout of ``agg``: its ``linear`` when it has one (a process grid's column-split
    blocks), the plain product otherwise."""
    linear = getattr(agg, "linear", None)
    if linear is not None:
        return linear(h, weight)
    return sparse_linear(h, weight) if isinstance(h, SparseBlock) else h @ weight


def global_ids(agg: Aggregation, width: int, device: torch.device) -> tuple[Tensor | None, Tensor | None]:
    """Global row and column ids of the block ``agg`` works on, for a matrix of global width ``width``.

    Read from ``agg.row_range`` and ``agg.col_range(width)`` when present; None means the whole range.
    """
    rows = cols = None
    if hasattr(agg, "row_range"):
        rows = torch.arange(*agg.row_range, device=device)
    if hasattr(agg, "col_range"):
        cols = torch.arange(*agg.col_range(width), device=device)
    return rows, cols
