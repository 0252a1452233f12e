"""`GridOps`: the `gridgnn.nn.layout.Layout` of one rank of a grid, in the algorithm's dense layout.

The models (`gridgnn.nn`) are single-device math; they call `GridOps.aggregate` for ``M x`` (M the
operator of the model: ``gcn``, ``mean`` or ``sum``, its blocks cut from the global matrix given here) and
`GridOps.linear` / `GridOps.add_bias` / `GridOps.row_sum` for the rest, so the same code trains on any grid.
Layout of activations: rows `row_range`, feature columns `col_range(width)` (see each SpMM module).

=========  ===================  ========================================  ===============
algorithm  product with W        weight / bias gradient reduced over       rows held by
=========  ===================  ========================================  ===============
1d, 1.5d   local ``h @ W``       ``row`` (replicas hold equal copies)      1 or c replicas
2d, 3d     gather or scatter     its column block: the processes of that   pc (or q)
           columns on ``col``    block (``row`` and ``depth``), then        processes
                                 gathered on ``col``; a parameter read
                                 whole: ``world``
=========  ===================  ========================================  ===============

On 2D/3D a process reads only its column block of each weight (its rows of W when the product reduce-scatters,
its columns when it gathers the input or holds full feature rows) and of each bias, so its gradient is zero
elsewhere: `linear`, `add_bias` and `scale_columns` note which block (`_note_slice`), and `reduce_gradients` sums
only those blocks over the processes sharing them before gathering them on ``col``. A model must read such a parameter
only through those calls (every model of `gridgnn.nn` does); one read two ways is reduced whole.

With ``defer_weight_gather`` the step stops before that gather: each rank writes its own block's sum and zeros
elsewhere, so Adam updates its own block exactly as before and the other blocks go stale (never read: `linear` and
`add_bias` read only the own block, and Adam's update is element-wise). `gather_parameters` makes them whole
again, on ``col``, where something reads a parameter whole: a checkpoint (with Adam's moments), the end of
training; a copy of the best weights, taken as it is, is gathered the same way then (``copies``). Per step that
saves the ``col`` all-gather: (pc - 1) / pc of the sliced parameters' values per rank.

Where the input features are sparse (`set_feature_pattern`), ``defer_weight_gather`` on every grid with more
than one block row (and on 2D/3D more than one column block: `gridgnn.cost.feature_row_cost.feature_row_axis`)
also reduces by rows the weights read only by
products of the features (``X W``; on 2D each rank's column block of them), each rank updating the rows it
owns and fetching, after the step, the rows it reads (`after_step`): `gridgnn.parallel.feature_weight_rows`.
Every other parameter is reduced as before.

With ``column_seed`` (``--reorder double-random``, 2D and 3D) the SpMM multiplies Â with its columns in a second
order between two moves of the rows (`gridgnn.spmm.column_exchange`); everything else here is unchanged.

A model that passes messages (`gridgnn.nn.message_passing`: ``messages``) gets the edges of its block row and
their halo exchange (`edges`, `source_rows`: `gridgnn.parallel.edge_halo`), on 1D and 1.5D, and on 2D and 3D
for a message separable over feature columns (the exchange of each process's column block on ``row``; 3D
gathers the block's rows on ``depth`` first).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from gridgnn.cost.column_steps import ColumnStep, column_steps
from gridgnn.cost.feature_row_cost import feature_row_axis, feature_row_sum_axis, member_bounds
from gridgnn.cost.operations import EdgeSum, FullRows, HeadMean, HeadSum, Product, RowSum
from gridgnn.cost.rank_cost import cached_orientations
from gridgnn.cost.weight_grad_steps import GradStep, weight_grad_steps
from gridgnn.errors import ConfigError
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import WORLD, ProcessGrid
from gridgnn.nn.message_passing import EdgeSet, check_message_grid, with_original_ids
from gridgnn.parallel.collectives import AllGatherCols, AllGatherColsReplicated, AllReduceCols, ReduceScatterCols
from gridgnn.parallel.edge_halo import EdgeHalo
from gridgnn.parallel.feature_weight_rows import FeatureRowGroups, FeatureWeightRows
from gridgnn.partition import block_bounds, block_sizes
from gridgnn.sparse.attention import head_partial_sums
from gridgnn.sparse.csr import SparseBlock
from gridgnn.sparse.cut import block_row_columns
from gridgnn.sparse.linear import sparse_linear
from gridgnn.spmm.attention import DropFn, attention, drop_by_original_ids
from gridgnn.spmm.registry import build_spmm


class GridOps:
    """The aggregation, dense products, logits and reductions of one rank. Built once per run."""

    def __init__(self, grid: ProcessGrid, comm: Communicator, adj: sp.csr_matrix, *,
                 dtype: torch.dtype = torch.float32, operator: str = "gcn", comm_mode: str = "dense",
                 parts: Sequence[int] | None = None, cache_panels: bool = False, feature_rows: int | None = None,
                 defer_weight_gather: bool = False, messages: bool = False, edge_attr=None,
                 column_seed: int | None = None):
        self.grid, self.comm, self.operator = grid, comm, operator
        self.spmm = build_spmm(grid, comm, adj, dtype=dtype, comm_mode=comm_mode, parts=parts,
                               cache_panels=cached_orientations(operator) if cache_panels else (),
                               column_seed=column_seed)
        self._row_ids: torch.Tensor | None = None  # original ids of the rows when the graph was reordered
        self._order: torch.Tensor | None = None  # and of every row (attention dropout names columns too)
        self.col_axis = self.spmm.num_col_blocks_axis
        self.row_replicas = grid.shape.replication * grid.shape.col_blocks  # processes holding each row
        # the width of the input features this rank keeps in full (`gridgnn.cost.operations.ModelOps.
        # keeps_feature_rows`; the caller decides, alike on every rank); None: its column block, as every activation
        self.feature_rows = feature_rows if self.col_axis is not None else None
        # id(parameter) -> (parameter, dim, width): this rank reads only its column block of `width` along `dim`
        # (None: read two ways, reduced whole); filled by linear and add_bias, alike on every rank
        self._slices: dict[int, tuple[torch.Tensor, int, int] | None] = {}
        self._splits_params = self.col_axis is not None and grid.size(self.col_axis) > 1
        # whether a step leaves the other column blocks of the sliced parameters stale, and what a deferred step
        # left stale since the last `gather_parameters` ("params", "state"): alike on every rank
        self.defer_gather = defer_weight_gather and self._splits_params
        self._stale: set[str] = set()
        # sparse features (`set_feature_pattern`): the feature weights' row exchanges (their F rows), and the
        # weights `linear` saw read by sparse features (id -> parameter) or by anything else (ids)
        self._rows_axis = feature_row_axis(grid.shape) if defer_weight_gather else None
        self._feature_rows: FeatureRowGroups | None = None
        self._num_features = 0
        self._sparse_reads: dict[int, torch.Tensor] = {}
        self._other_reads: set[int] = set()
        self._refresh_due = False
        # message passing (`gridgnn.nn.message_passing`): the block row's edges and their halo exchange
        self.halo: EdgeHalo | None = None
        self._named_edges: EdgeSet | None = None
        if messages:
            if self.col_axis is not None:  # 2D: separable messages on each process's feature columns
                check_message_grid(grid.algo, separable=True)
            self.halo = EdgeHalo(comm, adj, self.spmm.stage_layout(), edge_attr)

    @property
    def device(self) -> torch.device:
        return self.grid.device

    @property
    def row_range(self) -> tuple[int, int]:
        return self.spmm.row_range

    @property
    def num_nodes(self) -> int:
        """The global graph's vertex count (the rows of a global array)."""
        return self.spmm.num_nodes

    def col_range(self, width: int) -> tuple[int, int]:
        return self.spmm.col_range(width)

    def input_range(self, width: int) -> tuple[int, int]:
        """The input features' columns this rank holds: all ``width`` with ``feature_rows``, else its column
        block. Not collective."""
        return (0, width) if width == self.feature_rows else self.col_range(width)

    def row_ids(self, device: torch.device) -> torch.Tensor:
        """(m,) global ids of this rank's rows for the dropout masks: a reordered graph's original ids, else
        ``arange(*row_range)``. Not collective."""
        if self._row_ids is not None:
            return self._row_ids.to(device)
        return torch.arange(*self.row_range, device=device)

    def set_feature_pattern(self, indptr: np.ndarray, indices: np.ndarray, num_features: int) -> None:
        """The trainer's set-up where the input features are sparse (a CSR structure of every row of the graph,
        as trained on): with ``defer_weight_gather`` on a grid with a `feature_row_axis` (1D, 1.5D, 2D, 3D), the
        feature weights are reduced by rows from here on (`gridgnn.parallel.feature_weight_rows`; `defer_gather`
        becomes True). Not collective (every rank computes every block row's feature columns alike); elsewhere
        nothing."""
        if self._rows_axis is None:
            return
        shape = self.grid.shape
        touched = block_row_columns(indptr, indices, member_bounds(shape, self.spmm.stage_layout()), num_features)
        if shape.depth > 1:  # 3D: the sub-blocks S[k][l] of this process's depth slice l, k = 0 .. q - 1
            touched = touched[self.grid.index("depth")::shape.depth]
        self._feature_rows = FeatureRowGroups(self.comm, touched, self._rows_axis, self.device,
                                              feature_row_sum_axis(shape))
        self._num_features = num_features
        self.defer_gather = True

    def set_vertex_order(self, order: Sequence[int] | np.ndarray | None) -> None:
        """Name this rank's rows ``order[r0:r1]`` in `row_ids` (``order``: a reordered graph's original id of
        each row, `gridgnn.data.reorder`); None: their own numbers. Not collective."""
        # on the grid's device once: dropout asks for these ids every epoch and every attention tile
        self._order = None if order is None else torch.from_numpy(np.array(order, dtype=np.int64)).to(self.device)
        self._row_ids = None if order is None else self._order[slice(*self.row_range)]
        self._named_edges = None

    def aggregate(self, x: torch.Tensor) -> torch.Tensor:
        """``M x`` in the layout, M the operator ``adj`` (collective: the SpMM's axes)."""
        return self.spmm(x)

    __call__ = aggregate

    def row_sum(self, x: torch.Tensor) -> torch.Tensor:
        """(m, 1): each of this rank's rows summed over all global columns. 2D/3D: an all-reduce of the
        partial sums on ``col`` (phase ``dense``, and again in backward); else not collective."""
        partial = x.sum(dim=1, keepdim=True)
        if self.col_axis is None:
            return partial
        return self._on_columns(partial, column_steps(RowSum(x.shape[1], partial.requires_grad)))

    def head_sum(self, x: torch.Tensor, heads: int, width: int) -> torch.Tensor:
        """(m, K): each row's sum over the columns of each of K equal heads of a ``width``-wide matrix.
        1D/1.5D: not collective; 2D/3D: the partial sums of this rank's columns all-reduced on ``col``
        (phase ``dense``, and again in backward)."""
        partial = head_partial_sums(x, heads, width, self.col_range(width))
        if self.col_axis is None:
            return partial
        return self._on_columns(partial, column_steps(HeadSum(width, heads, partial.requires_grad)))

    def edge_sum(self, values: torch.Tensor) -> torch.Tensor:
        """(E, k) per-edge partial sums of this rank's feature columns -> their totals over all columns. 2D/3D:
        an all-reduce on ``col`` (phase ``dense``, and again in backward: every rank of the grid row runs the
        same edges, each on its columns); else not collective."""
        if self.col_axis is None:
            return values
        return self._on_columns(values.contiguous(), column_steps(EdgeSum(values.shape[1], values.requires_grad)))

    def head_mean(self, x: torch.Tensor, heads: int, width: int) -> torch.Tensor:
        """(m, block of width / K columns): the mean over the K heads. 2D/3D: the heads' columns gathered on
        ``col`` first (phase ``dense``; backward: a reduce-scatter)."""
        if self.col_axis is not None:
            x = self._on_columns(x, column_steps(HeadMean(width, heads, x.requires_grad)))
        mean = x.view(x.shape[0], heads, width // heads).mean(dim=1)
        if self.col_axis is None:
            return mean
        c0, c1 = self.col_range(width // heads)
        return mean[:, c0:c1]

    def attend(self, x: torch.Tensor, s_dst: torch.Tensor, s_src: torch.Tensor, *, heads: int, width: int,
               negative_slope: float, drop: DropFn | None) -> torch.Tensor:
        """Graph attention on this rank's tiles of the ``gat`` pattern (`gridgnn.spmm.attention`). Collective
        on the SpMM's axes (phases ``spmm_forward`` and ``spmm_backward``)."""
        return attention(x, s_dst, s_src, self.spmm.attention_stages(), heads=heads, width=width,
                         negative_slope=negative_slope, drop=drop_by_original_ids(drop, self._order))

    def edges(self) -> EdgeSet:
        """The edges into this rank's rows (`gridgnn.parallel.edge_halo`), built at set-up when the model passes
        messages (``messages``); `ConfigError` otherwise. Not collective."""
        if self.halo is None:
            raise ConfigError("this layout was built without message passing: build GridOps with messages=True "
                              "(gridgnn.grid_aggregation(..., messages=True))")
        if self._named_edges is None:  # sources named by their original ids (`set_vertex_order`)
            self._named_edges = with_original_ids(self.halo.edges, self._order)
        return self._named_edges

    def source_rows(self, x: torch.Tensor) -> torch.Tensor:
        """(m, w) -> (m + halo, w) (`gridgnn.parallel.edge_halo.EdgeHalo.source_rows`). Collective on ``row``."""
        return self.halo.source_rows(x)

    def _on_columns(self, x: torch.Tensor, steps: tuple[ColumnStep, ...]) -> torch.Tensor:
        """Run the forward steps of a layout operation on ``col`` (`gridgnn.cost.column_steps`, what the cost
        model prices) on ``x``, each as the autograd function whose backward is the step listed after it: an
        all-gather with a reduce-scatter in backward, a reduce-scatter with an all-gather, an all-reduce with
        an all-reduce; an all-gather with no backward step keeps each rank's own columns of the gradient.
        Collective on ``col``."""
        backward = {step.op for step in steps if step.backward}
        for step in (step for step in steps if not step.backward):
            if step.op == "all_reduce":
                x = AllReduceCols.apply(x, self.comm, self.col_axis, step.phase, step.float32)
            elif step.op == "reduce_scatter":
                x = ReduceScatterCols.apply(x, self.comm, self.col_axis, self._counts(step.width), step.phase)
            elif "reduce_scatter" in backward:
                x = AllGatherCols.apply(x, self.comm, self.col_axis, self._counts(step.width), step.phase)
            else:
                x = AllGatherColsReplicated.apply(x, self.comm, self.col_axis, self._counts(step.width), step.phase)
        return x

    def _counts(self, width: int) -> list[int]:
        return block_sizes(block_bounds(width, self.grid.size(self.col_axis), allow_empty=True,
                                        what="feature columns"))

    def linear(self, h: torch.Tensor | SparseBlock, weight: torch.Tensor) -> torch.Tensor:
        """``h @ W`` for this rank's block: (m, f_in block) -> (m, f_out block). W is replicated.

        ``h`` may be a sparse block of input features. 2D/3D (collective on ``col``, phase ``dense``): the
        narrower side crosses the grid row, either gathering h's columns first or reduce-scattering the
        partial products after. The input features in all ``feature_rows`` columns (`input_range`): not
        collective, h times W's columns of this rank.
        """
        if self.col_axis is None:
            if isinstance(h, SparseBlock):
                self._sparse_reads[id(weight)] = weight
                return sparse_linear(h, weight)
            self._other_reads.add(id(weight))
            return h @ weight
        if isinstance(h, SparseBlock):
            self._sparse_reads[id(weight)] = weight
        else:
            self._other_reads.add(id(weight))
        f_in, f_out = weight.shape
        full_rows = f_in == self.feature_rows and h.shape[1] == f_in  # no column block of f_in is f_in wide
        steps = column_steps(Product(f_in, f_out, bool(getattr(h, "requires_grad", False)), 0, full_rows), full_rows)
        if not steps:  # the rows' full features times W's columns of this rank
            c0, c1 = self._note_slice(weight, 1, f_out)
            return sparse_linear(h, weight[:, c0:c1]) if isinstance(h, SparseBlock) else h @ weight[:, c0:c1]
        if steps[0].op == "all_gather":  # the input's columns gathered, times W's columns of this rank
            full = self._on_columns(h.csr.to_dense() if isinstance(h, SparseBlock) else h, steps)
            c0, c1 = self._note_slice(weight, 1, f_out)
            return full @ weight[:, c0:c1]
        c0, c1 = self._note_slice(weight, 0, f_in)  # partial products of this rank's input columns, scattered
        partial = sparse_linear(h, weight[c0:c1]) if isinstance(h, SparseBlock) else h @ weight[c0:c1]
        return self._on_columns(partial, steps)

    def add_bias(self, z: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """``z + b`` with b's entries for this rank's columns. Not collective."""
        c0, c1 = self._note_slice(bias, 0, bias.shape[0])
        return z + bias[c0:c1]

    def scale_columns(self, z: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        """``z * g`` with g's entries for this rank's columns (reduced as a bias). Not collective."""
        c0, c1 = self._note_slice(gain, 0, gain.shape[0])
        return z * gain[c0:c1]

    def _note_slice(self, param: torch.Tensor, dim: int, width: int) -> tuple[int, int]:
        """This rank's column block (c0, c1) of the ``width`` entries of ``param`` along ``dim``, noted for
        `reduce_gradients` (a parameter read along two ways is reduced whole). Not collective."""
        if self.col_axis is not None:
            noted = self._slices.get(id(param), (param, dim, width))
            self._slices[id(param)] = (param, dim, width) if noted is not None and noted[1:] == (dim, width) else None
        return self.col_range(width)

    def full_rows(self, z: torch.Tensor, width: int) -> torch.Tensor:
        """All ``width`` columns of this rank's rows (for log-softmax and the loss); phase ``loss``.

        Every process of the ``col`` group gets the same rows and computes the same loss on them, so the
        backward pass keeps each one's own columns of the gradient.
        """
        if self.col_axis is None:
            return z
        return self._on_columns(z, column_steps(FullRows(width)))

    def reduce_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """Sum replicated parameters' gradients over the processes holding distinct parts (phase
        ``weight_grad``), running the steps of `gridgnn.cost.weight_grad_steps` (which the cost model prices):
        the parameters read whole all-reduced packed (1D/1.5D on ``row``, 2D/3D on ``world``); on 2D/3D each
        rank's column blocks of the others (`_note_slice`), packed, summed over the processes of its column
        block (`_sum_over_block`) and all-gathered on ``col`` (with ``defer_gather``: not gathered, zeros in the
        other blocks); with `set_feature_pattern` the feature weights' own rows summed by rows on the
        `feature_row_axis` (zeros elsewhere; `_reduce_feature_rows`). A parameter without a gradient counts as
        zeros; afterwards every ``grad`` is a view into one fresh buffer."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        groups = self._row_groups(params) if self._feature_rows is not None else []
        by_rows = {k for _, members in groups for k, *_ in members}
        sliced = {k: self._slices[id(p)][1:] for k, p in enumerate(params) if self._noted(p) and k not in by_rows}
        whole = [k for k in range(len(params)) if k not in sliced and k not in by_rows]
        if not sliced and not by_rows:  # one all-reduce of everything, in place in the new buffer
            flat = torch.cat([g.reshape(-1) for g in grads])
        elif self.defer_gather:  # the own blocks and rows and the whole parameters are written below, the rest 0
            flat = grads[0].new_zeros(sum(g.numel() for g in grads))
        else:  # every value is written below: the whole parameters' sums, then every gathered block
            flat = grads[0].new_empty(sum(g.numel() for g in grads))
        views = [v.view_as(g) for v, g in zip(flat.split([g.numel() for g in grads]), grads, strict=True)]
        slices = [(grads[k], views[k], *sliced[k]) for k in sorted(sliced)]
        blocks = bool(slices) and any(x.numel() for block in self._block_views([(o, d, w) for _, o, d, w in slices])
                                      for x in block)  # alike on every rank: widths below the column count
        steps = weight_grad_steps(self.grid.shape, whole=bool(whole), blocks=blocks,
                                  row_groups=len(groups),
                                  defer=self.defer_gather)
        with self.comm.phase("weight_grad"):
            if whole:
                part = flat if len(whole) == len(params) else torch.cat([grads[k].reshape(-1) for k in whole])
                for step in steps:
                    if step.part == "whole":
                        self.comm.all_reduce(part, step.axis)
                if part is not flat:
                    _unpack(part, [views[k] for k in whole])
            if blocks:
                self._reduce_slices(slices, [step for step in steps if step.part == "blocks"])
            if groups:
                self._reduce_feature_rows(groups, grads, views)
        for p, view in zip(params, views, strict=True):
            p.grad = view  # views into one fresh buffer

    def _feature_weights(self, params: list[torch.nn.Parameter]) -> list[int]:
        """Indices into ``params`` of the weights reduced by rows: read by `linear` of sparse features only (and
        on 2D/3D, read by column blocks: `_noted`)."""
        return [k for k, p in enumerate(params)
                if self._sparse_reads.get(id(p)) is p and id(p) not in self._other_reads
                and (self.col_axis is None or self._noted(p))]

    def _row_groups(self, params: list[torch.nn.Parameter]) -> list[tuple[FeatureWeightRows, list[tuple]]]:
        """The feature weights' row exchanges, each with its members ``(k, dim, start, length)``: parameter k's
        part it moves is ``t.narrow(dim, start, length)`` of a tensor t of its shape (dim None: all of t).
        1D/1.5D: one exchange of the whole weights (rows [0, F)). 2D: this rank's column block of each weight, by
        the way it is cut (`gridgnn.cost.feature_row_cost.weight_groups`): the input's columns F_j (its rows
        F_j, every column), then the output's (every row, its columns). Not collective."""
        ids, f = self._feature_weights(params), self._num_features
        if self.col_axis is None:
            return [(self._feature_rows.of(0, f), [(k, None, 0, 0) for k in ids])] if ids else []
        groups = []
        for dim in (0, 1):
            members = []
            for k in ids:
                _, noted_dim, width = self._slices[id(params[k])]
                if noted_dim == dim:
                    c0, c1 = self.col_range(width)
                    members.append((k, dim, c0, c1 - c0))
            if members:
                lo, hi = self.col_range(f) if dim == 0 else (0, f)
                groups.append((self._feature_rows.of(lo, hi), members))
        return groups

    @staticmethod
    def _part(t: torch.Tensor, dim: int | None, start: int, length: int) -> torch.Tensor:
        return t if dim is None else t.narrow(dim, start, length)

    def _reduce_feature_rows(self, groups: list[tuple[FeatureWeightRows, list[tuple]]], grads: list[torch.Tensor],
                             outs: list[torch.Tensor | None]) -> None:
        """The feature weights' gradients (``grads[k]``, this rank's partial sums) summed by rows into their own
        rows of ``outs[k]`` (zero elsewhere is the caller's), exchange by exchange of ``groups`` (`_row_groups`);
        the next `after_step` refreshes. Collective on the `feature_row_axis`."""
        for rows, members in groups:
            rows.reduce([self._part(grads[k], *cut) for k, *cut in members],
                        [self._part(outs[k], *cut) for k, *cut in members])
        self._stale = {"params", "state"}
        self._refresh_due = True

    def _gather_feature_rows(self, params: list[torch.nn.Parameter], tensors: list[list[torch.Tensor | None]]) -> None:
        """Every owner's rows of the feature weights' parts into place in each tensor of ``tensors`` (lists of
        one tensor, or None, per parameter: the parameters, a state tensor of each, copies): one all-gather per
        row exchange. Collective on the `feature_row_axis`."""
        for rows, members in self._row_groups(params):
            rows.gather([self._part(kind[k], *cut) for kind in tensors for k, *cut in members
                         if kind[k] is not None])

    def after_step(self, params: list[torch.nn.Parameter]) -> None:
        """After the optimizer step of a `reduce_gradients` that reduced feature weights by rows: fetch the rows
        of them this rank reads from their owners (phase ``weight_grad``). Collective on ``row`` then; else
        nothing (not collective)."""
        if not self._refresh_due:
            return
        with torch.no_grad(), self.comm.phase("weight_grad"):
            for rows, members in self._row_groups(params):
                rows.refresh([self._part(params[k].detach(), *cut) for k, *cut in members])
        self._refresh_due = False

    def gather_parameters(self, params: list[torch.nn.Parameter], optimizer: torch.optim.Optimizer | None = None,
                          copies: list[torch.Tensor] | None = None) -> None:
        """Make the parameters whole again after deferred steps (``defer_gather``): each rank's column block of
        every sliced parameter, and with ``optimizer`` of each of its state tensors of the parameter's shape
        (Adam's moments), all-gathered into place on ``col`` (phase ``weight_grad``, between steps). Call it
        alike on every rank before reading a parameter whole; where no deferred step ran since the last call
        it does nothing (not collective). ``copies`` (one per parameter, of its shape, on this device): a copy
        of the parameters taken between steps, whose blocks are gathered in place instead (collective on
        ``col`` whenever ``defer_gather``). With `set_feature_pattern` the feature weights' owned rows are
        gathered first, on the `feature_row_axis` (`gridgnn.parallel.feature_weight_rows`)."""
        if copies is not None:
            if self.defer_gather:
                with torch.no_grad(), self.comm.phase("weight_grad"):
                    self._gather_deferred(params, [copies])
            return
        todo = self._stale & ({"params", "state"} if optimizer is not None else {"params"})
        if not todo:
            return
        kinds = [[p.detach() for p in params]] if "params" in todo else []
        if "state" in todo:  # Adam's moments: the state tensors of each parameter's shape, in the state's order
            states = [[t for t in optimizer.state.get(p, {}).values() if torch.is_tensor(t) and t.shape == p.shape]
                      for p in params]
            kinds += [[s[n] if n < len(s) else None for s in states] for n in range(max(map(len, states), default=0))]
        with torch.no_grad(), self.comm.phase("weight_grad"):
            self._gather_deferred(params, kinds)
        self._stale -= todo

    def _gather_deferred(self, params: list[torch.nn.Parameter], kinds: list[list[torch.Tensor | None]]) -> None:
        """`gather_parameters` of ``kinds`` (lists of one tensor, or None, per parameter): the feature weights'
        rows on the `feature_row_axis` (with `set_feature_pattern`), then every sliced parameter's column blocks
        on ``col`` (2D/3D)."""
        if self._feature_rows is not None:
            self._gather_feature_rows(params, kinds)
        if self.col_axis is None:
            return
        blocks = [(kind[k], *self._slices[id(p)][1:]) for kind in kinds for k, p in enumerate(params)
                  if kind[k] is not None and self._noted(p)]
        self._gather_blocks(self._block_views(blocks))

    def _noted(self, param: torch.Tensor) -> bool:
        """Whether this rank reads only a column block of ``param`` (so its gradient is reduced by blocks)."""
        noted = self._slices.get(id(param)) if self._splits_params else None
        return noted is not None and noted[0] is param

    def _block_views(self, tensors: list[tuple[torch.Tensor, int, int]]) -> list[list[torch.Tensor]]:
        """For each column block k, the views of block k of every ``(tensor, dim, width)`` (``width`` entries
        along ``dim``, cut as `col_range` cuts them). Not collective."""
        pcol = self.grid.size(self.col_axis)
        cuts = [(t, dim, block_bounds(width, pcol, allow_empty=True, what="feature columns"))
                for t, dim, width in tensors]
        return [[t.narrow(dim, b[k], b[k + 1] - b[k]) for t, dim, b in cuts] for k in range(pcol)]

    def _reduce_slices(self, slices: list[tuple[torch.Tensor, torch.Tensor, int, int]],
                       steps: list[GradStep]) -> None:
        """For each ``(gradient, out, dim, width)``: this rank's column block of the gradient (along ``dim``,
        of ``width``) summed over the processes sharing it into ``out``'s block by the blocks' ``steps``
        (`gridgnn.cost.weight_grad_steps`), then, where they end with the ``col`` all-gather, every block
        gathered into ``out`` (the full reduced gradient). Collective on the axes other than ``col``, then
        ``col``."""
        mine = self.grid.index(self.col_axis)
        outs = self._block_views([(out, dim, width) for _, out, dim, width in slices])
        own = torch.cat([x.reshape(-1) for x in self._block_views([(g, d, w) for g, _, d, w in slices])[mine]])
        if own.numel():  # alike on the processes sharing this column block
            own = self._sum_over_block(own, [step for step in steps if step.axis != self.col_axis])
        if not any(step.axis == self.col_axis for step in steps):  # deferred: the own block only
            _unpack(own, outs[mine])
            self._stale = {"params", "state"}
            return
        self._gather_blocks(outs, own)

    def _gather_blocks(self, blocks: list[list[torch.Tensor]], own: torch.Tensor | None = None) -> None:
        """Every column block (``blocks[k]``: the views of block k, `_block_views`) from the rank holding it,
        into place: one all-gather on ``col`` of the packed blocks (``own``: this rank's, packed; default: cut
        from its views). Collective on ``col``; skipped (alike on every rank) where every block is empty."""
        counts = [sum(x.numel() for x in block) for block in blocks]
        if not max(counts, default=0):
            return
        mine = self.grid.index(self.col_axis)
        if own is None:
            own = torch.cat([x.reshape(-1) for x in blocks[mine]])
        every = self.comm.all_gather_rows(own.view(-1, 1), self.col_axis, counts).view(-1)
        _unpack(every, [x for block in blocks for x in block])

    def _sum_over_block(self, own: torch.Tensor, steps: list[GradStep]) -> torch.Tensor:
        """``own`` (1-D, non-empty) summed over the processes of this column block by ``steps``: an all-reduce
        on the one axis above 1 besides ``col``; with two (3D) a reduce-scatter on ``row``, an all-reduce of
        this process's part on ``depth``, an all-gather on ``row`` (the bytes of one all-reduce over both,
        which two consecutive all-reduces would exceed)."""
        part, parts = own, None
        for step in steps:
            if step.op == "reduce_scatter":
                parts = block_sizes(block_bounds(own.numel(), self.grid.size(step.axis), allow_empty=True,
                                                 what="values"))
                part = self.comm.reduce_scatter_rows(own.view(-1, 1), step.axis, parts).view(-1)
            elif step.op == "all_gather":
                part = self.comm.all_gather_rows(part.view(-1, 1), step.axis, parts).view(-1)
            elif part.numel():  # an all-reduce; a part may be empty, alike on the processes of its group
                self.comm.all_reduce(part, step.axis)
        return part

    def global_sum(self, values: torch.Tensor) -> torch.Tensor:
        """Sum of per-row quantities over all rows of the graph (phase ``loss``, collective on world).

        Each row is held by `row_replicas` processes, so the world sum is divided by that count.
        """
        values = values.clone()
        with self.comm.phase("loss"):
            self.comm.all_reduce(values, WORLD)
        return values / self.row_replicas


def _unpack(flat: torch.Tensor, targets: list[torch.Tensor]) -> None:
    """Copy consecutive pieces of the 1-D ``flat`` into ``targets`` (views, in order). Not collective."""
    offset = 0
    for target in targets:
        target.copy_(flat[offset:offset + target.numel()].view_as(target))
        offset += target.numel()
