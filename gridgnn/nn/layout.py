"""The seam between a model and the process grid: what a model and its trainer may ask of a layout.

A model is single-device math over a `Layout`; it never knows the algorithm. Every activation is a block of
global rows `Layout.row_range` by global feature columns `Layout.col_range(width)` (the whole matrix on one
process). A layout offers exactly the operations whose result depends on that split; each method's docstring
in `Layout` gives its shapes and the axis it communicates on:

=======================  =================================================================================
``operator``, ``device``  the aggregation operator it multiplies by (`gridgnn.data.operators`); its device
``row_range``,            this process's global rows; its block of a ``width``-wide matrix's columns
``col_range(width)``
``input_range(width)``    its columns of the model's input features: ``col_range``, or all of them when it
                          keeps its rows' full features (``--full-feature-rows``); ``linear`` then takes them
``row_ids(device)``       the global ids the dropout masks give its rows (a reordered graph's original ids)
``aggregate(x)``          ``M x`` for that operator, with autograd (backward ``Mᵀ g``)
``linear(h, W)``          ``h @ W`` for replicated W, h dense or a `gridgnn.sparse.csr.SparseBlock` of features
``add_bias(z, b)``        ``z + b`` with b's entries for the block's columns
``scale_columns(z, g)``   ``z * g`` with g's entries for the block's columns (a norm's per-column gain)
``row_sum(x)``            (m, 1): each row's sum over all global columns (for row norms)
``full_rows(z, w)``       every one of the ``w`` columns of the block's rows (the class-column gather, for
                          log-softmax, the loss and embeddings)
``head_sum(x, K, w)``     (m, K): each row's sum over the columns of each of K equal heads of a ``w``-wide
                          matrix (the attention score terms), whole on every process holding the rows
``head_mean(x, K, w)``    (m, block of w / K columns): the mean of the K heads of a ``w``-wide matrix
``attend(x, ...)``        graph attention on the ``gat`` pattern: edge softmax of the score terms, then the
                          per-head weighted aggregation (`gridgnn.spmm.attention.attention`), with autograd
``edges()``               the `gridgnn.nn.message_passing.EdgeSet` of the process: every edge into its rows
                          (the operator's pattern), with their features (`MessagePassing`)
``source_rows(x)``        its rows of x, then the rows of other processes' vertices its edges read (the halo)
``reduce_gradients(ps)``  the trainer's gradient reduction: replicated parameters' gradients summed over the
                          processes holding distinct parts
``after_step(ps)``        after the optimizer step: the rows of the feature weights a rank reads, from the
                          ranks that updated them (1D/1.5D, ``--defer-weight-gather``, sparse features)
``gather_parameters(ps)`` whole parameters again where steps updated only each rank's column blocks (or row
                          blocks, above; ``--defer-weight-gather``): before anything reads a parameter whole
``global_sum(v)``         a per-row quantity (the loss, correct counts) summed over every row of the graph
``set_vertex_order(o)``   the trainer's set-up: rows of a reordered graph keep their original ids
=======================  =================================================================================

Gradients of replicated parameters are left partial by the layout's products (each process holds the sum over
its own block); the trainer calls `Layout.reduce_gradients` once per step, a parameter whose gradient is a sum
over every element of a block (GIN's ε) included. A model reads each weight and bias only through `linear`,
`add_bias` and `scale_columns`: on 2D/3D a process's gradient is then zero outside the column block it read,
which is all the grid's reduction sums (`gridgnn.parallel.grid_ops`). `LocalLayout` is the single-process layout (every
reduction the identity); `gridgnn.parallel.grid_ops.GridOps` is the layout of one rank of a grid. Both satisfy
`Layout`; models and `gridgnn.train.loop.trainer.Trainer` have one code path for both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor, nn

from gridgnn.nn.features import sparse_linear
from gridgnn.nn.message_passing import EdgeSet, local_edge_set, with_original_ids
from gridgnn.sparse.attention import EdgeBlock
from gridgnn.sparse.csr import SparseBlock
from gridgnn.spmm.attention import DropFn, LocalStages, attention, drop_by_original_ids
from gridgnn.spmm.local import LocalSpMM


@runtime_checkable
class Layout(Protocol):
    """What a model and its trainer may ask of the layout of their activations (see the module table).

    m = rows of the block (``r1 - r0`` of `row_range`); "a block of width w" is the (m, c1 - c0) block of a
    global (n, w) matrix, (c0, c1) = ``col_range(w)``. Axes are the grid's (`gridgnn.grid.process_grid`); a
    layout of one process communicates on none.
    """

    operator: str
    """The aggregation operator's name (`gridgnn.data.operators`): ``gcn``, ``mean``, ``sum`` or ``gat``."""
    defer_gather: bool
    """Whether a step leaves parameters partly stale, to be made whole by `gather_parameters` (2D/3D with
    ``--defer-weight-gather``)."""

    @property
    def device(self) -> torch.device:
        """The device of this process's blocks (where the model and its inputs live). Not collective."""
        ...

    @property
    def row_range(self) -> tuple[int, int]:
        """(r0, r1): the global rows of every activation block this process holds (in the graph's own,
        possibly reordered, numbering). Not collective."""
        ...

    def col_range(self, width: int) -> tuple[int, int]:
        """(c0, c1): the global columns this process holds of a ``width``-wide activation. Not collective."""
        ...

    def input_range(self, width: int) -> tuple[int, int]:
        """(c0, c1): the global columns this process holds of the ``width``-wide input features: ``col_range``,
        or (0, width) when it keeps all of its rows' columns
        (`gridgnn.cost.operations.ModelOps.keeps_feature_rows`); `linear` then multiplies
        those full rows by its weight locally. Not collective."""
        ...

    def row_ids(self, device: torch.device) -> Tensor:
        """(m,) int64 on ``device``: the global ids the dropout masks give this process's rows: a reordered
        graph's original ids (`set_vertex_order`), else ``arange(r0, r1)``. Not collective."""
        ...

    def set_vertex_order(self, order: Sequence[int] | np.ndarray | None) -> None:
        """Name this process's rows by ``order[r0:r1]`` in `row_ids` (``order``: (n,) original id of each row
        of a reordered graph, `gridgnn.data.reorder`; None: the rows' own numbers). Not collective."""
        ...

    def aggregate(self, x: Tensor) -> Tensor:
        """``M x`` for the block x of width w: (m, w block) -> (m, w block), autograd computes ``Mᵀ g``.
        Collective on the SpMM's axes (1D: ``row``; 1.5D: ``row`` and ``rep``; 2D: ``row`` and ``col``;
        3D: all three)."""
        ...

    def linear(self, h: Tensor | SparseBlock, weight: Tensor) -> Tensor:
        """``h @ W`` for replicated W (f_in, f_out): (m, f_in block) -> (m, f_out block); h dense or sparse.
        Collective on ``col`` on 2D/3D grids (phase ``dense``); else not collective. Given the input features
        in all columns (`input_range` is (0, f_in)): local, the product with W's own output columns."""
        ...

    def add_bias(self, z: Tensor, bias: Tensor) -> Tensor:
        """``z + b`` for replicated b (w,): (m, w block) -> (m, w block). Not collective."""
        ...

    def scale_columns(self, z: Tensor, gain: Tensor) -> Tensor:
        """``z * g`` for replicated g (w,): each column times its entry, (m, w block) -> (m, w block); read as
        `add_bias` reads b (its gradient is reduced as a bias's). Not collective."""
        ...

    def row_sum(self, x: Tensor) -> Tensor:
        """(m, w block) -> (m, 1): each row's sum over all w global columns. Collective on ``col`` on 2D/3D
        grids (phase ``dense``); else not collective."""
        ...

    def full_rows(self, z: Tensor, width: int) -> Tensor:
        """(m, width block) -> (m, width): every column of this process's rows (the class-column gather).
        Collective on ``col`` on 2D/3D grids (phase ``loss``); else not collective (z itself)."""
        ...

    def head_sum(self, x: Tensor, heads: int, width: int) -> Tensor:
        """(m, width block) -> (m, heads): each row's sum over each head's width / heads columns. Collective
        on ``col`` on 2D/3D grids (phase ``dense``); else not collective."""
        ...

    def head_mean(self, x: Tensor, heads: int, width: int) -> Tensor:
        """(m, width block) -> (m, width / heads block): the mean of the heads. Collective on ``col`` on
        2D/3D grids (phase ``dense``); else not collective."""
        ...

    def edge_sum(self, values: Tensor) -> Tensor:
        """(E, k) -> (E, k): per-edge values that this process computed from its feature columns (partial sums
        over them, one row per edge of `edges`), summed over the processes holding the other columns of the same
        edges. Collective on ``col`` on 2D/3D grids (phase ``dense``, and again in backward); else ``values``."""
        ...

    def attend(self, x: Tensor, s_dst: Tensor, s_src: Tensor, *, heads: int, width: int, negative_slope: float,
               drop: DropFn | None) -> Tensor:
        """Graph attention: x (m, width block), score terms s_dst, s_src (m, heads) -> (m, width block).
        Collective on the SpMM's axes (as `aggregate`)."""
        ...

    def edges(self) -> EdgeSet:
        """The edges into this process's rows, with their features (`gridgnn.nn.message_passing.EdgeSet`);
        `gridgnn.errors.ConfigError` where the layout was built without them. On 2D/3D a process runs the edges
        on its feature columns (a message separable over them only). Not collective."""
        ...

    def source_rows(self, x: Tensor) -> Tensor:
        """(m, w) -> (m + h, w): this process's rows of x, then the h rows of other processes' vertices its
        edges read, numbered as `edges` numbers sources; autograd returns their gradients. Collective on
        ``row`` on a grid (3D: ``depth`` too; phase ``spmm_forward``, backward ``spmm_backward``); one process:
        x."""
        ...

    def reduce_gradients(self, params: list[nn.Parameter]) -> None:
        """Sum each replicated parameter's ``grad`` (partial after backward) over the processes holding
        distinct parts, in place. Collective on ``row`` (1D/1.5D); on 2D/3D on ``row`` and ``depth`` for the
        column blocks `linear` and `add_bias` read of each weight and bias, then ``col`` to gather them, and
        on the world for parameters read whole; phase ``weight_grad``; one process: not collective, the
        identity."""
        ...

    def after_step(self, params: list[nn.Parameter]) -> None:
        """The trainer calls it after each optimizer step: with ``--defer-weight-gather`` and sparse features,
        each rank fetches the rows of the feature weights it reads from the ranks that updated them (collective
        on ``row``, phase ``weight_grad``: `gridgnn.parallel.feature_weight_rows`); else not collective, nothing
        to do."""
        ...

    def gather_parameters(self, params: list[nn.Parameter], optimizer: torch.optim.Optimizer | None = None,
                          copies: list[Tensor] | None = None) -> None:
        """Make every parameter (and with ``optimizer`` its state of the parameter's shape) whole where steps
        updated only each rank's column blocks (`defer_gather`): collective on ``col`` there, phase
        ``weight_grad``; else not collective, nothing to do. Call it before reading a parameter whole.
        ``copies``: one tensor per parameter, of its shape and on the layout's device (a copy of the weights
        taken between steps), gathered in place instead of the parameters."""
        ...

    def global_sum(self, values: Tensor) -> Tensor:
        """(k,) per-row sums over this process's rows -> (k,) sums over all rows of the graph (a new tensor).
        Collective on the world, phase ``loss``; one process: not collective, ``values`` itself."""
        ...


class LocalLayout:
    """One process holds every row and column; ``aggregate`` is any ``x -> M x`` with autograd (e.g.
    `gridgnn.spmm.local.LocalSpMM`, whose matrix gives ``num_nodes`` and the edges of ``attend``; a plain
    callable needs ``num_nodes``). Not collective: every reduction is the identity."""

    def __init__(self, aggregation: Callable[[Tensor], Tensor], operator: str, num_nodes: int | None = None):
        if num_nodes is None:
            if not isinstance(aggregation, LocalSpMM):
                raise TypeError("a LocalLayout around a plain callable needs num_nodes (its row count)")
            num_nodes = aggregation.num_nodes
        self.aggregation, self.operator, self.num_nodes = aggregation, operator, num_nodes
        self.defer_gather = False  # one process updates every parameter whole
        self._row_ids: Tensor | None = None
        self._order: Tensor | None = None  # a reordered graph's original id of each row
        self._stages: LocalStages | None = None
        self._edge_attr: Tensor | None = None
        self._edges: EdgeSet | None = None

    def set_edge_features(self, edge_attr) -> None:
        """The graph's edge features, (nnz, d) aligned with the aggregation matrix's stored entries (CSR order;
        `gridgnn.data.edge_features`), for `edges`; None: none. Not collective."""
        self._edge_attr = None if edge_attr is None else torch.as_tensor(np.asarray(edge_attr, dtype=np.float32))
        self._edges = None

    @property
    def device(self) -> torch.device:
        if isinstance(self.aggregation, LocalSpMM):
            return self.aggregation.block.csr.device
        return torch.device("cpu")

    @property
    def row_range(self) -> tuple[int, int]:
        return 0, self.num_nodes

    def col_range(self, width: int) -> tuple[int, int]:
        return 0, width

    def input_range(self, width: int) -> tuple[int, int]:
        return self.col_range(width)

    def row_ids(self, device: torch.device) -> Tensor:
        if self._row_ids is not None:
            return self._row_ids.to(device)
        return torch.arange(*self.row_range, device=device)

    def set_vertex_order(self, order: Sequence[int] | np.ndarray | None) -> None:
        # on the layout's device once: dropout asks for these ids every epoch and every attention tile
        self._order = self._row_ids = None if order is None else \
            torch.from_numpy(np.array(order, dtype=np.int64)).to(self.device)
        self._edges = None  # its sources' original ids change

    def aggregate(self, x: Tensor) -> Tensor:
        return self.aggregation(x)

    __call__ = aggregate

    def linear(self, h: Tensor | SparseBlock, weight: Tensor) -> Tensor:
        return sparse_linear(h, weight) if isinstance(h, SparseBlock) else h @ weight

    def add_bias(self, z: Tensor, bias: Tensor) -> Tensor:
        return z + bias

    def scale_columns(self, z: Tensor, gain: Tensor) -> Tensor:
        return z * gain

    def row_sum(self, x: Tensor) -> Tensor:
        return x.sum(dim=1, keepdim=True)

    def full_rows(self, z: Tensor, width: int) -> Tensor:
        return z

    def head_sum(self, x: Tensor, heads: int, width: int) -> Tensor:
        return x.view(x.shape[0], heads, width // heads).sum(dim=2)

    def head_mean(self, x: Tensor, heads: int, width: int) -> Tensor:
        return x.view(x.shape[0], heads, width // heads).mean(dim=1)

    def edge_sum(self, values: Tensor) -> Tensor:
        return values

    def attend(self, x: Tensor, s_dst: Tensor, s_src: Tensor, *, heads: int, width: int, negative_slope: float,
               drop: DropFn | None) -> Tensor:
        """Attention over the whole pattern of the aggregation's matrix (a `LocalSpMM` of the ``gat``
        operator); its tile is built on first use."""
        if self._stages is None:
            if not isinstance(self.aggregation, LocalSpMM):
                raise TypeError("attention needs a LocalSpMM aggregation (its matrix gives the edges)")
            self._stages = LocalStages(EdgeBlock.from_csr(self.aggregation.block.csr))
        return attention(x, s_dst, s_src, self._stages, heads=heads, width=width, negative_slope=negative_slope,
                         drop=drop_by_original_ids(drop, self._order))

    def edges(self) -> EdgeSet:
        """Every stored entry of the aggregation's matrix (a `LocalSpMM`) as an edge, with the features of
        `set_edge_features`; built on first use."""
        if self._edges is None:
            if not isinstance(self.aggregation, LocalSpMM):
                raise TypeError("message passing needs a LocalSpMM aggregation (its matrix gives the edges)")
            csr = self.aggregation.block.csr
            attr = None if self._edge_attr is None else self._edge_attr.to(csr.device)
            if attr is not None and attr.shape[0] != csr.values().shape[0]:
                raise ValueError(f"{attr.shape[0]} edge-feature rows for the {csr.values().shape[0]} edges of the "
                                 "aggregation's matrix")
            self._edges = with_original_ids(local_edge_set(csr, attr), self._order)
        return self._edges

    def source_rows(self, x: Tensor) -> Tensor:
        return x

    def reduce_gradients(self, params: list[nn.Parameter]) -> None:
        """Nothing to reduce: one process holds every part."""

    def after_step(self, params: list[nn.Parameter]) -> None:
        """Nothing to fetch: every parameter is whole."""

    def gather_parameters(self, params: list[nn.Parameter], optimizer: torch.optim.Optimizer | None = None,
                          copies: list[Tensor] | None = None) -> None:
        """Nothing to gather: every parameter is whole."""

    def global_sum(self, values: Tensor) -> Tensor:
        return values


def as_layout(agg: Layout | Callable[[Tensor], Tensor], operator: str, num_rows: int | None = None) -> Layout:
    """``agg`` itself when it is a `Layout` (its operator must be ``operator``), else a `LocalLayout` around
    the callable ``agg``, taken to multiply by ``operator``'s matrix (``num_rows``: its row count, needed
    unless ``agg`` is a `LocalSpMM`). Raises ValueError on a mismatch. Not collective."""
    if isinstance(agg, Layout):
        if agg.operator != operator:
            raise ValueError(f"the layout aggregates with the {agg.operator!r} operator; this model needs "
                             f"{operator!r}")
        return agg
    return LocalLayout(agg, operator, None if isinstance(agg, LocalSpMM) else num_rows)


def global_ids(layout: Layout, width: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Global row ids (`Layout.row_ids`: a reordered graph's original ids) and column ids
    (``arange(*col_range(width))``) of the block ``layout`` holds of a ``width``-wide matrix. Not collective."""
    return layout.row_ids(device), torch.arange(*layout.col_range(width), device=device)


def input_ids(layout: Layout, width: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """`global_ids` of the ``width``-wide input features as ``layout`` holds them (``input_range``). Not
    collective."""
    return layout.row_ids(device), torch.arange(*layout.input_range(width), device=device)
