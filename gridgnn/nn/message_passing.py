"""Your own message-passing layer, written as single-device PyTorch, trained on a grid: `MessagePassing`.

In the spirit of PyG's ``MessagePassing``: a subclass says what one edge j -> i sends (`MessagePassing.message`
of the destination's row ``x_i``, the source's row ``x_j`` and the edge's features ``edge_attr``), how a vertex
combines what it receives (``aggr``: ``sum``, ``mean`` or ``max``), and what it makes of the result
(`MessagePassing.update`). `MessagePassing.propagate` runs it over the `gridgnn.nn.layout.Layout` it is given:

1. ``layout.edges()``: the `EdgeSet` of this process: every edge into its rows (the operator's pattern, with
   their features), destinations numbered by the process's rows, sources by ``layout.source_rows``;
2. ``layout.source_rows(x)``: the process's rows of x, then the rows of the other processes' vertices its edges
   read (the halo: on a grid, one all-to-all of exactly those rows, `gridgnn.parallel.edge_halo`; backward
   returns their gradients to their owners);
3. the messages, computed where the edges live, aggregated into the destination rows (`aggregate_messages`),
   then ``update``.

Everything the subclass computes is local, so its own parameters (an ``nn.Linear`` in a message) are
replicated like every weight on 1D and 1.5D, their gradients summed over ``row`` by the trainer's
`gridgnn.nn.layout.Layout.reduce_gradients`. Which grids run a message: 1D and 1.5D, where a process holds
whole rows and every edge into them (`gridgnn.parallel.edge_halo`), any message; 2D and 3D split feature
columns, so they run a message separable over them (`MessagePassing.column_separable`: each process computes
its columns of every message) and refuse any other with one line (`check_message_grid`).

``max``: a row without incoming edges gets 0 (as PyG); its backward gives each row's gradient to the messages
equal to the row's maximum, split evenly among ties (torch's ``scatter_reduce`` ``amax``, which PyG also uses
without torch_scatter), so a grid gives the single-process gradient exactly: every edge of a row is on the
process holding the row.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gridgnn.cost.operations import DEFAULT_EDGE_ARRAYS
from gridgnn.errors import ConfigError

AGGREGATIONS = ("sum", "mean", "max")
"""How a vertex combines its incoming messages."""

MESSAGE_ALGORITHMS = ("local", "1d", "1.5d")
"""The algorithms that run a general message (whole rows and every edge into them on one process)."""
SEPARABLE_ALGORITHMS = (*MESSAGE_ALGORITHMS, "2d", "3d")
"""The algorithms that run a message separable over feature columns (`MessagePassing.column_separable`): 2D
and 3D too, where process (i, j) (3D: (i, j, l)) runs the edges into its rows on feature columns j."""


@dataclass(frozen=True)
class EdgeSet:
    """The edges of one process, in CSR order of its rows (by destination, then source).

    ``dst`` (E,) int64: each edge's destination, a row of the process's block (0..``num_rows``-1); ``src`` (E,)
    int64: each edge's source, a row of ``Layout.source_rows(x)`` (0..``num_sources``-1: the process's own rows
    first); ``attr`` (E, d) float32: the edges' features (None: the graph has none); ``source_ids``
    (num_sources,) int64: the original id of each source row (a reordered graph's ids before reordering), which
    keys per-edge random draws alike on every layout (GAT's attention dropout); None where unknown."""

    dst: Tensor
    src: Tensor
    attr: Tensor | None
    num_rows: int
    num_sources: int
    source_ids: Tensor | None = None

    @property
    def num_edges(self) -> int:
        return int(self.dst.shape[0])

    # the pattern a dropout mask is drawn on (`gridgnn.nn.dropout.stored_keep`): entries at (dst, src)
    @property
    def rows(self) -> Tensor:
        return self.dst

    @property
    def cols(self) -> Tensor:
        return self.src

    @property
    def shape(self) -> tuple[int, int]:
        return self.num_rows, self.num_sources


def local_edge_set(matrix: torch.Tensor, edge_attr: Tensor | None) -> EdgeSet:
    """The `EdgeSet` of one process holding the whole (n, n) sparse CSR ``matrix`` (its stored entries are the
    edges; sources are numbered as rows, there is no halo) and ``edge_attr`` (nnz, d) aligned with them."""
    crow, col = matrix.crow_indices(), matrix.col_indices()
    n = matrix.shape[0]
    dst = torch.repeat_interleave(torch.arange(n, device=crow.device), crow[1:] - crow[:-1])
    return EdgeSet(dst, col.to(torch.int64), edge_attr, n, n, torch.arange(n, device=crow.device))


def with_original_ids(edges: EdgeSet, order: Tensor | None) -> EdgeSet:
    """``edges`` with its ``source_ids`` renamed by ``order`` (a reordered graph's original id of every row,
    `gridgnn.data.reorder`; None: unchanged)."""
    if order is None or edges.source_ids is None:
        return edges
    return dataclasses.replace(edges, source_ids=order[edges.source_ids])


def aggregate_messages(messages: Tensor, index: Tensor, num_rows: int, aggr: str) -> Tensor:
    """(E, w) messages into (num_rows, w): each row's ``sum``, ``mean`` or ``max`` (0 for a row with none) of
    the messages whose ``index`` (E,) is that row; autograd (module docstring for ``max``'s ties)."""
    width = messages.shape[1]
    out = messages.new_zeros((num_rows, width))
    if aggr == "max":
        return out.scatter_reduce(0, index.view(-1, 1).expand(-1, width), messages, "amax", include_self=False)
    out = out.index_add(0, index, messages)
    if aggr == "mean":
        ones = messages.new_ones(index.shape[0])  # not bincount: this also runs on meta tensors (the trace)
        counts = messages.new_zeros(num_rows).index_add(0, index, ones).clamp(min=1)
        out = out / counts.view(-1, 1)
    return out


def require_edge_features(kind: str, edge_dim: int) -> None:
    """`ConfigError` (one line) when a model of ``kind`` that reads edge features is built without them."""
    if edge_dim < 1:
        raise ConfigError(f"--model {kind} needs edge features: the graph has none (give --edge-features "
                          "FILE.npy, or a dataset with edge features)")


def check_aggregation(aggr: str) -> str:
    if aggr not in AGGREGATIONS:
        raise ConfigError(f"aggr must be one of {', '.join(AGGREGATIONS)}; got {aggr!r}")
    return aggr


def check_message_grid(algo: str, what: str = "a message-passing layer", separable: bool = False) -> None:
    """Raise `ConfigError` (one line) where ``algo`` cannot run the message (`MESSAGE_ALGORITHMS`; a message
    separable over feature columns: `SEPARABLE_ALGORITHMS`)."""
    if algo == "auto" or algo in (SEPARABLE_ALGORITHMS if separable else MESSAGE_ALGORITHMS):
        return
    raise ConfigError(f"{what} runs on the 1d and 1.5d grids (a process holds whole rows and every edge into "
                      f"them); --algo {algo} splits feature columns: use --algo 1d or 1.5d")


class MessagePassing(nn.Module):
    """Base of a message-passing layer (module docstring). A subclass overrides `message` and `update` (and
    sets ``aggr``); ``layer(x, layout)`` runs `propagate`. ``x``: (m, w) the process's rows; returns `update`'s
    (m, w')."""

    operator = "sum"
    """The edges are the stored entries of A (no self-loops added), aligned with the graph's edge features."""
    reads_destination = True
    """Whether `message` reads ``x_i``; a layer whose message does not (GINE's) sets False and gets None, so
    that no (E, w) copy of the destinations' rows is made every step."""
    column_separable = False
    """Whether column c of a message depends only on column c of x_i and x_j (GINE's ReLU(x_j + e W_e)): such a
    layer also runs on 2D and 3D grids, where ``message`` gets the process's feature columns (`SEPARABLE_ALGORITHMS`);
    any other layer needs whole rows (1D, 1.5D) and is refused elsewhere with one line."""

    def __init__(self, aggr: str = "sum"):
        super().__init__()
        self.aggr = check_aggregation(aggr)

    def edge_values(self, width: int, edge_features: int) -> int:
        """The float values per edge this layer's autograd keeps for backward until the step's backward reaches
        it, for the memory model (`gridgnn.cost.halo_cost`), given the width of its source rows and the edges'
        features. The default, `DEFAULT_EDGE_ARRAYS` (two) arrays of ``width``, is the message before and after a
        non-linearity; a layer that keeps more (an MLP on every edge) or less says so (0: it keeps nothing)."""
        return DEFAULT_EDGE_ARRAYS * width

    def edge_temporaries(self, width: int, edge_features: int) -> int:
        """The float values per edge alive at once only while this layer runs (the gathered source rows, the
        message's temporaries, their gradients in backward), for the memory model: a rank holds them for one
        layer at a time, so the widest layer's count. Default: `DEFAULT_EDGE_ARRAYS` arrays of ``width``."""
        return DEFAULT_EDGE_ARRAYS * width

    def message(self, x_i: Tensor | None, x_j: Tensor, edge_attr: Tensor | None) -> Tensor:
        """(E, w) destination rows (None when `reads_destination` is False), (E, w) source rows, (E, d) edge
        features or None -> (E, w_msg)."""
        return x_j

    def update(self, aggr_out: Tensor, x: Tensor) -> Tensor:
        """(m, w_msg) aggregated messages and the (m, w) rows themselves -> the layer's output rows."""
        return aggr_out

    def propagate(self, x: Tensor, layout) -> Tensor:
        """Messages over ``layout``'s edges, aggregated, updated (module docstring). Collective as
        ``layout.source_rows`` (``row`` on a grid)."""
        if not self.column_separable and tuple(layout.col_range(x.shape[1])) != (0, x.shape[1]):
            raise ConfigError(f"{type(self).__name__} needs whole rows: its message is not separable over feature "
                              "columns (column_separable), so it runs on the 1d and 1.5d grids only")
        edges = layout.edges()
        sources = layout.source_rows(x)
        x_i = x[edges.dst] if self.reads_destination else None
        messages = self.message(x_i, sources[edges.src], edges.attr)
        if not isinstance(messages, Tensor) or messages.ndim != 2 or messages.shape[0] != edges.num_edges:
            shape = tuple(messages.shape) if isinstance(messages, Tensor) else type(messages).__name__
            raise ValueError(f"{type(self).__name__}.message must return one row per edge, ({edges.num_edges}, "
                             f"width); got {shape}")
        return self.update(aggregate_messages(messages, edges.dst, edges.num_rows, self.aggr), x)

    def forward(self, x: Tensor, layout) -> Tensor:
        return self.propagate(x, layout)
