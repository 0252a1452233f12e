"""What the cost model needs to know about a graph: sizes, and the nnz of Â in any block partition.

Two sources, one interface (`GraphStats`):

- ``GraphStats.from_graph(graph)``: exact. Counts the stored entries of the normalized adjacency
  Â = D^-1/2 (A + I) D^-1/2 that training uses (the pattern of A plus every missing self-loop), so each
  block's nnz is the one the distributed SpMMs move (`exact=True`). With ``self_loops=False`` it counts the
  pattern of A itself: the ``mean`` and ``sum`` operators of GraphSAGE and GIN (`gridgnn.data.operators`).
  The self-loops are added by `gridgnn.sparse.adjacency.add_self_loops`, as training adds them.
- ``GraphStats.from_counts(n, num_edges, ...)``: for graphs too large to load. ``num_edges`` counts stored
  adjacency entries (an undirected edge twice, no self-loops, as ``gridgnn info`` prints ``stored_edges``);
  Â has ``num_edges + n`` entries, assumed spread uniformly over the matrix (`exact=False`): block nnz are
  the expected ``nnz * rows * cols / n²`` rounded to integers.

Pure code, no process group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from gridgnn.cost.block_stats import BlockReader, pool_processes
from gridgnn.cost.column_order import ColumnOrder, order_for
from gridgnn.cost.sparse_stages import ColumnMajor, column_major, touched_counts
from gridgnn.sparse.adjacency import add_self_loops
from gridgnn.sparse.cut import block_row_columns, csr_structure

TABLE_CELLS = 1 << 22
"""Largest `GraphStats.count_once` table (rows x columns of the common refinement): 32 MiB of counts. Grids
up to a few hundred processes fit; beyond, every shape counts on its own."""


@dataclass
class GraphStats:
    """Sizes of a graph and, when exact, the sparsity pattern of Â as CSR structure.

    ``indptr``: row pointers, length ``num_nodes + 1``; ``indices``: column id of every stored entry, length
    ``nnz`` (None for the uniform estimate). Both are kept as given (any integer dtype, memory-mapped arrays
    stay on disk), so exact statistics cost no copy of the graph; `grouped_nnz` reads ``indices`` in chunks.
    ``feature_nnz``: stored non-zeros of the input features when they are sparse, else None (dense).
    ``parts``: the vertex partition of a METIS-reordered graph (``meta["reorder_bounds"]``), which a grid's row
    blocks follow (`gridgnn.cost.stages.row_blocks`); None: balanced blocks. ``feature_indptr`` and
    ``feature_indices``: the CSR structure of sparse input features (exact statistics of a graph with sparse
    features; else None), for `feature_touch_counts`. ``num_edge_features``: the d features of every edge (0:
    none; the width a message-passing model's edge weights take). ``column_seed``: a run on 2D or 3D puts Â's
    columns in σ's order of that seed (``--reorder double-random``: ``meta["column_seed"]``); ``indices`` stay in
    the vertex order and `in_column_order` gives the statistics a grid's blocks are counted on. None: no second order.
    ``opener`` and ``workers``: for a prepared folder, a picklable callable returning its (indptr, indices) and
    the processes that read its row blocks (`gridgnn.cost.block_stats.BlockReader`; 1: this process).

    Statistics of a structure held in memory (scipy arrays) use its column-major copy (`column_major`, fast
    for every grid shape at once); those of a memory-mapped or sharded one (`streamed`) are computed block by
    block (`gridgnn.cost.block_stats`), so that no copy of Â's structure is made.
    """

    name: str
    num_nodes: int
    nnz: int
    num_features: int
    num_classes: int
    feature_nnz: int | None = None
    indptr: np.ndarray | None = field(default=None, repr=False)
    indices: np.ndarray | None = field(default=None, repr=False)
    parts: tuple[int, ...] | None = None
    feature_indptr: np.ndarray | None = field(default=None, repr=False)
    feature_indices: np.ndarray | None = field(default=None, repr=False)
    num_edge_features: int = 0
    column_seed: int | None = None
    opener: Callable | None = field(default=None, repr=False, compare=False)
    workers: int = field(default=1, repr=False, compare=False)
    # (row bounds, column bounds, counts) of the last `count_once`, or None
    _table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, init=False, repr=False,
                                                                      compare=False)
    _columns: ColumnMajor | None = field(default=None, init=False, repr=False, compare=False)
    _touch: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # feature_touch_in
    _in_columns: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # in_column_order
    _column_order: ColumnOrder | None = field(default=None, init=False, repr=False, compare=False)  # its σ
    _reader: BlockReader | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def exact(self) -> bool:
        """True when block nnz are counted from the actual graph, False for the uniform estimate."""
        return self.indices is not None

    @property
    def streamed(self) -> bool:
        """True when Â's structure is memory-mapped or sharded (a prepared folder's): its statistics are
        computed block by block, never from a copy of the whole structure."""
        return self.indices is not None and (isinstance(self.indices, np.memmap)
                                             or not isinstance(self.indices, np.ndarray))

    def blocks(self) -> BlockReader:
        """The `gridgnn.cost.block_stats.BlockReader` of Â's structure (built on first use)."""
        if self._reader is None:
            self._reader = BlockReader(self.indptr, self.indices, self.opener, self.workers)
        return self._reader

    def touched(self, row_bounds: list[int], segments: list[int]) -> np.ndarray:
        """(R, S) int64: the distinct columns of each row block of Â inside each segment (the rows a receiver of
        sparse communication needs; exact statistics only)."""
        if not self.streamed:
            return touched_counts(self.column_major(), row_bounds, segments)
        rows = self.blocks().map("touched", row_bounds, list(segments), self.num_nodes)
        return np.stack(rows) if rows else np.zeros((0, len(segments) - 1), dtype=np.int64)

    def covers(self, row_bounds: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(cover, pre): (R, R) int64 each, entry [i, j] for the cut "block j sends to block i" of Â's pattern
        (`gridgnn.sparse.cover`; 0 on the diagonal): its minimum vertex cover, and the entries whose partial
        sums block j computes; one block row at a time (exact statistics only)."""
        rows = self.blocks().map("covers", row_bounds, list(row_bounds), self.num_nodes)
        parts = np.stack(rows)  # (R, 2, R)
        return parts[:, 0, :], parts[:, 1, :]

    @classmethod
    def from_graph(cls, graph, *, normalized_adj=None, self_loops: bool = True) -> GraphStats:
        """Exact statistics of a loaded `gridgnn.data.graph.Graph` (pass ``normalized_adj`` when Â is
        already at hand: anything with ``indptr``, ``indices``, ``nnz`` and ``shape``, e.g. a scipy CSR
        matrix or a memory-mapped `gridgnn.data.prepared.RowBlockCSR`, used without a copy; otherwise its
        pattern is derived from ``graph.adj``)."""
        if normalized_adj is None:
            adj = sp.csr_matrix(graph.adj)
            adj.eliminate_zeros()
            adj = (adj != 0).astype(np.int8)
            adj = add_self_loops(adj, dtype=np.int8) if self_loops else sp.csr_matrix(adj)
        else:
            adj = normalized_adj
        features = graph.features
        # scipy sparse, or a memory-mapped `gridgnn.data.prepared.RowBlockCSR` (it has nnz too)
        feature_nnz = int(features.nnz) if sp.issparse(features) or hasattr(features, "nnz") else None
        parts = getattr(graph, "meta", {}).get("reorder_bounds")
        pattern = (csr_structure(features) if feature_nnz is not None else None) or (None, None)
        opener = getattr(graph, "structure_opener", None) if normalized_adj is getattr(graph, "norm_adj", None) \
            else None  # a prepared folder's own operator: other processes can open it again
        workers = pool_processes(int(adj.nnz)) if opener else 1
        return cls(graph.name, int(adj.shape[0]), int(adj.nnz), int(graph.num_features), int(graph.num_classes),
                   feature_nnz, adj.indptr, adj.indices, None if parts is None else tuple(int(b) for b in parts),
                   *pattern, num_edge_features=int(getattr(graph, "num_edge_features", 0) or 0),
                   column_seed=getattr(graph, "meta", {}).get("column_seed"),
                   opener=opener() if opener else None, workers=workers)

    @classmethod
    def from_counts(cls, num_nodes: int, num_edges: int, num_features: int, num_classes: int, *,
                    name: str = "statistics", feature_density: float | None = None,
                    self_loops: bool = True) -> GraphStats:
        """Uniform-nnz statistics from counts alone; Â gets ``num_edges + num_nodes`` entries (``num_edges``
        without ``self_loops``: the operators of GraphSAGE and GIN)."""
        if num_nodes < 1 or num_edges < 0 or num_features < 1 or num_classes < 1:
            raise ValueError("num_nodes, num_features and num_classes must be positive and num_edges >= 0")
        feature_nnz = None
        if feature_density is not None:
            feature_nnz = int(round(feature_density * num_nodes * num_features))
        nnz = int(num_edges) + (int(num_nodes) if self_loops else 0)
        return cls(name, int(num_nodes), nnz, int(num_features), int(num_classes), feature_nnz)

    def in_column_order(self, rows: int, depth: int = 1) -> GraphStats:
        """These statistics with Â's columns in σ's order of ``column_seed`` (``--reorder double-random``) on a
        grid of ``rows`` row blocks, each cut into ``depth`` sub-blocks (`gridgnn.cost.column_order.order_for`):
        what `gridgnn.cost.rank_cost.shape_blocks` counts a 2D or 3D grid's blocks on. Nothing of Â is copied:
        the copy's `grouped_nnz` maps each chunk of column ids through σ as it reads it (in memory or
        memory-mapped, here or on the pool), the only statistic the dense 2D and 3D blocks ask for. One copy per
        σ (one for every 2D grid, one per 3D row count and depth); itself without a seed, or for the uniform
        estimate (which has no columns)."""
        if self.column_seed is None or not self.exact:
            return self
        key = (rows, depth) if depth > 1 else 1  # 2D and 3D with d = 1: one class, the same σ for any row count
        if key not in self._in_columns:
            copy = dataclasses.replace(self, column_seed=None)
            copy._column_order = order_for(self.num_nodes, rows, depth, self.column_seed)
            self._in_columns[key] = copy
        return self._in_columns[key]

    @property
    def column_order(self) -> ColumnOrder | None:
        """The σ these statistics count Â's columns in (`in_column_order`'s copies), None: the vertex order."""
        return self._column_order

    def feature_touch_counts(self, row_bounds: list[int], owners: int) -> np.ndarray | None:
        """(R, owners) int64: for each block of rows ``row_bounds[r]:row_bounds[r + 1]`` (R blocks), how many of
        the feature columns its vertices have fall in each of ``owners`` balanced blocks of the ``num_features``
        columns (`gridgnn.partition.block_bounds`): the rows of a first-layer weight gradient block row r
        holds, by the process owning them (`gridgnn.parallel.feature_weight_rows`). None without the structure of
        sparse features."""
        from gridgnn.partition import block_bounds

        return self.feature_touch_in(row_bounds, block_bounds(self.num_features, owners, allow_empty=True,
                                                              what="feature columns"))

    def feature_touch_in(self, row_bounds: list[int], owner_bounds: list[int]) -> np.ndarray | None:
        """(R, len(owner_bounds) - 1) int64: `feature_touch_counts` for any ascending feature-column bounds
        ``owner_bounds`` (on 2D the owners cut one column block of the features: `gridgnn.cost.feature_row_cost`).
        None without the structure of sparse features. Cached per (row bounds, owner bounds)."""
        if self.feature_indices is None:
            return None
        key = (tuple(int(b) for b in row_bounds), tuple(int(b) for b in owner_bounds))
        if key not in self._touch:
            if key[0] not in self._touch:  # each block row's distinct feature columns, once per row bounds
                self._touch[key[0]] = block_row_columns(self.feature_indptr, self.feature_indices, row_bounds,
                                                        self.num_features)
            owners = np.asarray(owner_bounds, dtype=np.int64)
            self._touch[key] = np.array([np.diff(np.searchsorted(columns, owners)) for columns in self._touch[key[0]]],
                                        dtype=np.int64).reshape(len(row_bounds) - 1, len(owners) - 1)
        return self._touch[key]

    def column_major(self) -> ColumnMajor:
        """Â's entries in column order (`gridgnn.cost.sparse_stages.ColumnMajor`), built on first use and kept:
        what the sparse variants' touched rows are counted from, for every grid shape (exact statistics only;
        8 bytes per stored entry)."""
        if self._columns is None:
            self._columns = column_major(self.indptr, self.indices, self.num_nodes)
        return self._columns

    def grouped_nnz(self, row_bounds: list[int], col_bounds: list[int],
                    col_group: np.ndarray | None = None, num_groups: int | None = None) -> np.ndarray:
        """nnz of Â per (row block, column group); shape (len(row_bounds)-1, number of groups).

        ``col_group[b]`` names the group of column block b (default: each block its own group); groups
        number ``num_groups`` (default: the largest name + 1; empty groups count 0). Exact
        counts (one pass over the entries, `CHUNK_ENTRIES` at a time, or sums of the `count_once` table when
        the bounds lie on it) or, for statistics from counts, the uniform expectation rounded to integers.
        Raises `DataError` on column ids outside the matrix.
        """
        num_cols = len(col_bounds) - 1
        group = np.arange(num_cols) if col_group is None else np.asarray(col_group, dtype=np.int64)
        if num_groups is None:
            num_groups = int(group.max()) + 1 if num_cols else 0
        if self.indices is None:
            n = float(self.num_nodes)
            heights = np.diff(np.asarray(row_bounds, dtype=np.float64))
            widths = np.bincount(group, weights=np.diff(np.asarray(col_bounds, dtype=np.float64)),
                                 minlength=num_groups)
            return np.rint(self.nnz * np.outer(heights, widths) / (n * n)).astype(np.int64)
        if self._table is not None:
            from_table = self._sum_table(row_bounds, col_bounds, group, num_groups)
            if from_table is not None:
                return from_table
        return self._count(row_bounds, col_bounds, group, num_groups)

    def count_once(self, partitions: Iterable[tuple[list[int], list[int]]]) -> None:
        """Count Â's entries once on the common refinement of ``partitions`` (pairs of row and column bounds,
        each from 0 to ``num_nodes``), so that `grouped_nnz` on any of them sums that table instead of reading
        Â again: `--algo auto` prices every grid shape from one pass over the graph. No-op for statistics from
        counts, or when the table would exceed `TABLE_CELLS` (then each call counts on its own)."""
        partitions = list(partitions)
        if self.indices is None or not partitions:
            return
        rows = np.unique(np.concatenate([np.asarray(r, dtype=np.int64) for r, _ in partitions]))
        cols = np.unique(np.concatenate([np.asarray(c, dtype=np.int64) for _, c in partitions]))
        if (len(rows) - 1) * (len(cols) - 1) > TABLE_CELLS:
            return
        counts = self._count(rows.tolist(), cols, np.arange(len(cols) - 1), len(cols) - 1)
        self._table = (rows, cols, counts)

    def _sum_table(self, row_bounds, col_bounds, group: np.ndarray, num_groups: int) -> np.ndarray | None:
        """`grouped_nnz` from the `count_once` table, or None when the bounds are not on its refinement."""
        rows, cols, counts = self._table
        row_bounds = np.asarray(row_bounds, dtype=np.int64)
        col_bounds = np.asarray(col_bounds, dtype=np.int64)
        if not (np.isin(row_bounds, rows).all() and np.isin(col_bounds, cols).all()):
            return None
        # every fine bin lies inside one requested block: the last block starting at or before it
        row_block = np.searchsorted(row_bounds, rows[:-1], side="right") - 1
        col_block = np.searchsorted(col_bounds, cols[:-1], side="right") - 1
        out = np.zeros((len(row_bounds) - 1, num_groups), dtype=np.int64)
        np.add.at(out, (row_block[:, None], group[col_block][None, :]), counts)
        return out

    def _count(self, row_bounds, col_bounds, group: np.ndarray, num_groups: int) -> np.ndarray:
        """One pass over Â's entries in the rows of ``row_bounds``, block by block
        (`gridgnn.cost.block_stats.groups_in_block`)."""
        rows = self.blocks().map("groups", row_bounds, np.asarray(col_bounds, dtype=np.int64),
                                 np.asarray(group, dtype=np.int64), num_groups, f"{self.name}: column ids of Â",
                                 self._column_order)
        return np.stack(rows) if rows else np.zeros((0, num_groups), dtype=np.int64)

    def describe(self) -> str:
        """One line: sizes and where the block nnz come from."""
        source = "exact block nnz from the graph" if self.exact else "uniform-nnz block estimate (no graph loaded)"
        return (f"{self.name}: {self.num_nodes:,} nodes, {self.nnz:,} entries of Â, {self.num_features} "
                f"features, {self.num_classes} classes; {source}")
