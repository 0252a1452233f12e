"""Peak memory of one rank during a training step, by component (pure; arrays of shape (P,), bytes).

=====================  ==========================================================================
component              what the rank holds
=====================  ==========================================================================
graph                  its Â blocks as CSR, each with its transpose (1.5D: one pair per column block of
                       its share; 2D: packed panels per owned stage segment, both orientations; 3D: one
                       packed panel pair): row pointers and column indices at ``sizes.index`` bytes,
                       values at ``sizes.sparse_value``; with ``--cache-panels`` also every panel of
                       its block row it received at set-up, in each orientation it keeps
                       (`gridgnn.cost.rank_cost.cached_orientations`), packed as they arrived
features               its block of the input features (dense m x f_local, or sparse: CSR of X and Xᵀ,
                       the scipy copy and the value permutation, ~40 bytes per stored value); all f
                       columns of its rows when ``--full-feature-rows`` takes effect
labels_masks           int64 labels and three bool masks of its m rows
weights_optimizer      parameters, gradients, the flat gradient buffer of the all-reduce, Adam's two
                       moments: 5 copies of every parameter (replicated on every rank)
activations            tensors autograd keeps for backward, and the gradients alive during it: per layer
                       its input as the weight gradient needs it (and the ReLU-dropout keep mask), about
                       1.5 tensors of its output width, gathered full-width inputs on 2D/3D, the
                       log-probabilities and gathered logits (fitted: see `_activation_bytes`)
attention              GAT only: the pattern of the rank's own attention tiles (row, column, transpose
                       order: 32 bytes per entry), per layer the saved coefficients, signs and dropout
                       factors (K·(5 + 8 with attention dropout) bytes per entry), the backward's
                       transient edge arrays (4 of K floats per entry) and, on 2D/3D, the pattern and
                       coefficients of the received panels in flight
receive_buffers        the largest transient receive buffers of a stage (a dense panel and, on 2D/3D,
                       `PANELS_IN_FLIGHT` Â panels: the next arrives before the last is freed, and the
                       transport may stage an early message) and on 3D the partial product and the
                       gathered gradient; with Â's columns in a second order (``--reorder double-random``)
                       the block moved into that order and the rows sent and received to move it.
                       ``--comm sparse`` (`_sparse_row_bytes`): on 1D/1.5D the one all-to-all's send
                       and receive buffers (every touched row at once: on a graph without locality nearly
                       all of X, where dense holds two blocks; ``--comm cover``: `COVER_BUFFER_COPIES` of
                       its pairs' covers); on 2D/3D a
                       stage's touched rows, sent (the root: every receiver's) or received with the
                       dense panel they fill, in place of the broadcast panel. ``--cache-panels``: no
                       Â panel in flight (they are in ``graph``)
wire_buffers           ``--comm-precision`` other than fp32 (`gridgnn.grid.wire`): the encoded copies of
                       the activation rows in flight (sent and received, `wire_row_bytes` per row) and the
                       float32 temporaries of encoding and decoding them (`WIRE_TEMPORARIES` blocks of
                       the rows one side holds); 0 for fp32
messages               message-passing models only (`gridgnn.cost.halo_cost.halo_memory_bytes`): the
                       block row's edge lists and edge features, the source rows with their halo, the
                       per-edge arrays autograd keeps (summed over the layers) and the per-edge
                       temporaries of the widest layer
=====================  ==========================================================================

This counts the algorithm's working set. It does not count the interpreter and library code (the planner and
the memory guard add that baseline: `gridgnn.cost.process_baseline`), nor the global graph a worker loads
before sharding it (gridgnn's workers each read the whole dataset once).
"""

from __future__ import annotations

import numpy as np

from gridgnn.cost.algorithms import costs_of
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.halo_cost import halo_memory_bytes
from gridgnn.cost.operations import Attend, ModelOps
from gridgnn.cost.sparse_cost import INDEX_BYTES, cover_row_counts, row_counts, touched_rows
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.cost.terms import ShapeBlocks, feature_widths

SPARSE_FEATURE_BYTES = 40
"""Bytes per stored input-feature value on a rank (scipy CSR 8, torch CSR and its transpose 16, the
transpose permutation 8, dropped-out values 8)."""
PANELS_IN_FLIGHT = 2.5
"""Received Â panels alive at once on 2D/3D: the current one, the previous one (freed after the next
arrives), and half a panel on average for the transport's staging of messages that arrive early."""
SPARSE_DENSITY_LIMIT = 0.25  # as gridgnn.nn.features: denser sparse features become a dense tensor
WIRE_TEMPORARIES = {"fp32": 0, "bf16": 0, "fp16": 1, "int8": 2}
"""Float32 temporaries of a row block's size that `gridgnn.grid.wire` allocates while encoding or decoding it,
the larger side counted: fp16 clamps into a copy before rounding; int8 scales into a copy and adds a tensor
of uniform noise (encode), and widens the int8 values before scaling them (decode); bf16 casts directly."""


def memory_per_rank(blocks: ShapeBlocks, ops: ModelOps, feature_rows: bool, stats: GraphStats, sizes: SizeInfo,
                    comm: str = "dense", kept: np.ndarray | int = 0, device: str = "cpu") -> dict[str, np.ndarray]:
    """Bytes per rank by component (see the module table) of the model whose layout operations are ``ops``
    (`gridgnn.cost.operations`); ``feature_rows``: its first layer reads full feature rows
    (``--full-feature-rows`` in effect); ``comm``: the SpMM variant (``dense`` or ``sparse``); ``kept``: (P,)
    bytes of the Â panels ``--cache-panels`` received once and keeps
    (`gridgnn.cost.rank_cost.panel_cache_terms`; 0 without it); ``device``: the device type training runs on
    (`sparse_features`)."""
    m = blocks.local_rows.astype(np.int64)
    pcol = blocks.shape.col_blocks
    algorithm = costs_of(blocks.shape.algo)
    out = {
        "graph": algorithm.graph_bytes(blocks, sizes) + kept,
        "features": _feature_bytes(blocks, stats, pcol, sizes, feature_rows, device),
        "labels_masks": m * 11,
        "weights_optimizer": np.full(blocks.shape.world_size, 5 * ops.num_parameters * sizes.value,
                                     dtype=np.int64),
        "activations": _activation_bytes(m, ops, feature_rows, pcol, sizes, sparse_features(stats, device)),
        "receive_buffers": _buffer_bytes(blocks, ops, pcol, sizes, comm, np.asarray(kept) > 0),
        "attention": _attention_bytes(blocks, ops, sizes),
        "wire_buffers": _wire_bytes(blocks, ops, pcol, sizes, comm),
    }
    if ops.passes_messages:
        out["messages"] = halo_memory_bytes(blocks, ops, sizes)
    return {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}


def sparse_features(stats: GraphStats, device: str = "cpu") -> bool:
    """Whether training keeps the input features sparse, as `gridgnn.train.loop.trainer.model_input` decides: on
    a CPU (``device``), sparse features no denser than `SPARSE_DENSITY_LIMIT`; on any other device never
    (they are made dense there)."""
    nnz = stats.feature_nnz
    on_cpu = device.split(":")[0].lower() == "cpu"  # "cpu:0" too, as torch.device names it
    return on_cpu and nnz is not None and nnz <= SPARSE_DENSITY_LIMIT * stats.num_nodes * stats.num_features


def _feature_bytes(blocks: ShapeBlocks, stats: GraphStats, pcol: int, sz: SizeInfo,
                   full_rows: bool = False, device: str = "cpu") -> np.ndarray:
    """(P,) bytes of each rank's features: its column block of its rows, or all columns with ``full_rows``."""
    m = blocks.local_rows.astype(np.float64)
    j = blocks.coords.get("col")
    f = stats.num_features
    cols = feature_widths(f, pcol)[j] if j is not None and not full_rows else np.full(len(m), f)
    if sparse_features(stats, device):
        local = stats.feature_nnz * (m / stats.num_nodes) * (cols / f)
        return (local * SPARSE_FEATURE_BYTES + 3 * (m + 1) * sz.index).astype(np.int64)
    return (m * cols * sz.value).astype(np.int64)


def _local(width: int, pcol: int) -> int:
    return -(-width // pcol)


ACTIVATION_ROW_CONSTANT = 20
"""Floats per row alive at the peak whatever the widths: the dropout hash's row ids and chunk temporaries, the
loss's per-row terms (fitted with the probe described in `_activation_bytes`)."""
OUTPUT_COPIES = 1.5
"""Tensors of a layer's output width alive at the peak: the product, the bias sum on its way into the next
ReLU-dropout, and during backward its gradient (fitted: 1.5 of them on average)."""


def _activation_bytes(m: np.ndarray, ops: ModelOps, feature_rows: bool, pcol: int, sz: SizeInfo,
                      sparse_input: bool) -> np.ndarray:
    """Floats per row that autograd keeps, and gradients alive in backward, at local widths.

    Per layer: its input as the weight gradient needs it (layer 0: the dropped-out dense features, or
    ``Â H`` when aggregating first; nothing more for sparse features, already in the features term; later
    layers: the ReLU-dropout output or ``Â H``, plus its one-byte keep mask: 1.25), `OUTPUT_COPIES` of its
    output width, on a column-split grid the gathered full-width input or the full-width partial product, and
    `ACTIVATION_ROW_CONSTANT` plus the log-probabilities and gathered logits. Fitted on the peak resident set
    of 1D training steps (VmHWM reset after set-up) on R-MAT 2^18 with edge factor 2, features 64/256 and
    hidden 16/64/128, where activations are most of the working set: within 10 % of every case.
    """
    per_row = ACTIVATION_ROW_CONSTANT
    for layer in ops.layers:
        full_rows = feature_rows and layer.index == 0
        fin, fout = _local(layer.f_in, 1 if full_rows else pcol), _local(layer.f_out, pcol)
        if layer.index > 0:
            per_row += 1.25 * fin
        elif layer.aggregates_first or not sparse_input:
            per_row += fin
        per_row += OUTPUT_COPIES * fout
        if pcol > 1 and not full_rows:  # full feature rows: no gathered input, no partial product
            # the gathered full-width input, kept for the weight gradient, or the full-width partial product
            # before its reduce-scatter (and its gradient)
            per_row += layer.f_in if layer.f_in <= layer.f_out else layer.f_out
    classes = ops.widths[-1]
    per_row += _local(classes, pcol) + 2 * classes
    return (m * per_row * sz.value).astype(np.int64)


EDGE_INDEX_BYTES = 32
"""Bytes per entry of an attention tile's pattern: rows, columns, transposed columns and the permutation into
the transpose's order (int64 each)."""


def _attention_bytes(blocks: ShapeBlocks, ops: ModelOps, sz: SizeInfo) -> np.ndarray:
    """The per-edge arrays of attention on each rank (see the module table); zeros for a model without."""
    attends = [op for layer in ops.layers for op in layer.aggregations if isinstance(op, Attend)]
    if not attends:
        return np.zeros(blocks.shape.world_size, dtype=np.int64)
    own = blocks.local_nnz.astype(np.int64)
    saved = sum(op.heads * (1 + sz.value * (3 if op.dropout else 1)) for op in attends)
    widest = max(op.heads for op in attends)
    total = own * (EDGE_INDEX_BYTES + saved + 4 * widest * sz.value)
    if blocks.shape.splits_features:  # Â panels (and their coefficients) in flight
        i = blocks.coords["row"]
        panel = blocks.nnz.max(axis=1)[i].astype(np.int64)
        total = total + (PANELS_IN_FLIGHT * panel * (EDGE_INDEX_BYTES + widest * sz.value)).astype(np.int64)
    return total


def _buffer_bytes(blocks: ShapeBlocks, ops: ModelOps, pcol: int, sz: SizeInfo, comm: str = "dense",
                  cached: np.ndarray | bool = False) -> np.ndarray:
    """(P,) receive buffers (the module table); ``cached``: (P,) whether a rank keeps received panels (then
    none is in flight)."""
    heights = np.diff(blocks.row_bounds).astype(np.int64)
    width = max(_local(layer.spmm_width, pcol) for layer in ops.layers)
    i = blocks.coords["row"]
    sparse = comm in ("sparse", "cover") and blocks.shape.sizes[0] > 1  # one row block: nothing to exchange
    if not blocks.shape.splits_features:
        if sparse:
            return _sparse_row_bytes(blocks, width, sz, comm)
        return 2 * heights.max() * width * sz.value + 0 * i
    # Â panels in flight: a stage's panel is received before the previous stage's is released, and gloo
    # sometimes stages a message that arrives before its receive is posted (measured: 2 to 3 panels)
    panel = PANELS_IN_FLIGHT * (blocks.nnz.max(axis=1)[i] * (sz.index + sz.sparse_value) + (heights[i] + 1) * sz.index)
    panel = np.where(cached, 0, panel)  # --cache-panels: received once, counted in ``graph``
    dense = costs_of(blocks.shape.algo).DENSE_BUFFERS * heights[i] * width * sz.value
    x_panel = _sparse_row_bytes(blocks, width, sz) if sparse else heights.max() * width * sz.value
    if blocks.column_rows is not None:  # `gridgnn.spmm.column_exchange`: X in σ's order, and the rows it moved
        x_panel = x_panel + (blocks.local_rows + 2 * blocks.column_rows) * width * sz.value
    return (panel + dense + x_panel).astype(np.int64)


def _wire_bytes(blocks: ShapeBlocks, ops: ModelOps, pcol: int, sz: SizeInfo, comm: str = "dense") -> np.ndarray:
    """(P,) the ``wire_buffers`` component (the module table): of the widest SpMM's activation rows in flight
    in float32, ``both`` (P,) bytes sent and received at once (dense: the root's block and a received one, on
    any grid the largest block row; sparse and cover: the one all-to-all's, or a stage's, touched rows), the
    encoded copy of both and `WIRE_TEMPORARIES` float32 copies of one side."""
    zero = np.zeros(blocks.shape.world_size, dtype=np.int64)
    if sz.exact:
        return zero
    width = max(_local(layer.spmm_width, pcol) for layer in ops.layers)
    if width == 0:
        return zero
    if comm in ("sparse", "cover") and blocks.shape.sizes[0] > 1:
        both = _sparse_row_bytes(blocks, width, FLOAT32, comm)
    else:
        both = zero + 2 * int(np.diff(blocks.row_bounds).max()) * width * FLOAT32.value
    encoded = both * int(sz.row_bytes(width)) // (width * FLOAT32.value)
    return (encoded + WIRE_TEMPORARIES[sz.precision] * both // 2).astype(np.int64)


COVER_BUFFER_COPIES = 1.5
"""A cover exchange's send and receive buffers at once, in copies of its rows: beside both buffers, the rows of
X and the partial sums are each gathered into a temporary before they are copied into the send buffer, and the
received rows gathered again by kind (rows of X, partial sums) before they are multiplied or added (measured:
R-MAT 2^17, 1D P = 8, hidden 256, `tests/cost/test_epoch_model.py`)."""


def _sparse_row_bytes(blocks: ShapeBlocks, width: int, sz: SizeInfo, comm: str = "sparse") -> np.ndarray:
    """(P,) bytes of the touched rows of X (width ``width``, local columns) a rank holds in flight under
    ``--comm sparse``: 1D/1.5D, its send and receive buffers of the one all-to-all (forward: the rows others
    ask of it and the rows it asks for; backward the same two, reversed); 2D/3D, the most of any stage it runs:
    as the root, the rows of every receiver, else its own and the dense panel it fills from them (`gridgnn.spmm.
    stage_rows`). 1D/1.5D add the int64 index of the rows it sends. ``comm`` ``cover`` (1D/1.5D): the same
    buffers of its pairs' covers (`gridgnn.cost.sparse_cost.cover_row_counts`: rows of X and partial sums).
    Cached in ``blocks.cache`` (the planner prices several variants of one shape)."""
    key = ("sparse_row_bytes", width, sz, comm)
    if key not in blocks.cache:
        blocks.cache[key] = _touched_row_bytes(blocks, width, sz, comm)
    return blocks.cache[key]


def _touched_row_bytes(blocks: ShapeBlocks, width: int, sz: SizeInfo, comm: str = "sparse") -> np.ndarray:
    """`_sparse_row_bytes`, computed."""
    cover = comm == "cover" and not blocks.shape.splits_features
    forward, backward = (cover_row_counts if cover else row_counts)(blocks)  # rows received in forward; in
    # backward (= the rows it sends)
    if not blocks.shape.splits_features:
        copies = COVER_BUFFER_COPIES if cover else 1
        return (copies * (forward + backward) * width * sz.value + backward * INDEX_BYTES).astype(np.int64)
    layout, u = touched_rows(blocks)  # (R, S) rows of segment s that block row i touches
    segments = np.arange(u.shape[1])
    sent = u.sum(axis=0) - u[layout.root, segments]  # (S,) rows the root of s sends
    filled = np.diff(layout.segments)[None, :] + u  # a receiver fills the stage's dense panel from its rows
    rows = np.where(layout.root[None, :] == np.arange(u.shape[0])[:, None], sent[None, :], filled)  # (R, S)
    group = blocks.groups
    runs = layout.group[None, :] == group[:, None]  # (P, S): the segments each rank's group runs
    most = np.where(runs, rows[blocks.coords["row"]], 0).max(axis=1)
    return (most * width * sz.value).astype(np.int64)

