"""Algorithm names -> SpMM classes: ``"1d"``, ``"1.5d"``, ``"2d"``, ``"3d"``, each dense or sparse, and 1D and 1.5D
by vertex cover (``--comm``)."""

from __future__ import annotations

from collections.abc import Sequence

import scipy.sparse as sp
import torch

from gridgnn.data.prepared import RowBlockCSR
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.spmm.base import DistributedSpMM
from gridgnn.spmm.column_exchange import ColumnOrderedSpMM
from gridgnn.spmm.cover_15d import CoverSpMM15D
from gridgnn.spmm.sparse_15d import SparseSpMM15D
from gridgnn.spmm.sparse_summa import SparseSpMM2D, SparseSpMM3D
from gridgnn.spmm.spmm_2d import SpMM2D
from gridgnn.spmm.spmm_3d import SpMM3D
from gridgnn.spmm.spmm_15d import SpMM15D

SPMM_CLASSES: dict[str, type[DistributedSpMM]] = {"1d": SpMM15D, "1.5d": SpMM15D, "2d": SpMM2D, "3d": SpMM3D}
SPARSE_CLASSES: dict[str, type[DistributedSpMM]] = {"1d": SparseSpMM15D, "1.5d": SparseSpMM15D,
                                                    "2d": SparseSpMM2D, "3d": SparseSpMM3D}
"""``--comm sparse``: the variants that move only the rows of X each receiver's Â block touches."""
COVER_CLASSES: dict[str, type[DistributedSpMM]] = {"1d": CoverSpMM15D, "1.5d": CoverSpMM15D}
"""``--comm cover``: each pair of processes exchanges its cut's minimum vertex cover (rows of X and partial
sums); 1D and 1.5D only (on 2D and 3D a partial sum would need the whole row of a block row)."""


def build_spmm(grid: ProcessGrid, comm: Communicator, adj: sp.csr_matrix, *,
               dtype: torch.dtype = torch.float32, comm_mode: str = "dense",
               parts: Sequence[int] | None = None, cache_panels: tuple[bool, ...] = (),
               column_seed: int | None = None) -> DistributedSpMM:
    """The SpMM of ``grid.algo`` for the global normalized adjacency ``adj`` (n x n, CSR); ``comm_mode``
    ``"sparse"`` picks the sparse variant (its set-up exchanges index sets: collective on the grid);
    ``parts``: a reordered graph's vertex partition, which the row blocks follow when it has as many blocks
    (`gridgnn.cost.stages`). ``cache_panels``: the orientations (``False``: Â, ``True``: Âᵀ) in which an
    algorithm whose Â panels move (2D, 3D) receives them once, at set-up, and keeps them
    (`gridgnn.spmm.panels.PanelCache`: collective on ``col``); ignored elsewhere. ``column_seed``: Â's columns
    in a second random order of that seed (``--reorder double-random``: `gridgnn.spmm.column_exchange`; dense
    2D and 3D only), None: in the vertex order.

    Every rank passes the same global ``adj`` and keeps only its own blocks (with ``cache_panels``, also the
    panels of its block row it received). Collective only for the sparse variants' index exchange and the
    cover's set-up (on ``row``), and the panel cache (on ``col``). A
    `gridgnn.data.prepared.RowBlockCSR` (memory-mapped) is used as is: the algorithms only cut their
    rows from it.
    """
    if not isinstance(adj, RowBlockCSR):
        adj = sp.csr_matrix(adj)
    classes = {"dense": SPMM_CLASSES, "sparse": SPARSE_CLASSES, "cover": COVER_CLASSES}.get(comm_mode)
    if classes is None:
        raise ValueError(f"comm_mode must be 'dense', 'sparse' or 'cover' (resolve 'auto' first), got {comm_mode!r}")
    if grid.algo not in classes:
        raise ValueError(f"--comm {comm_mode} runs on {' and '.join(classes)}, not {grid.algo}")
    cls = classes[grid.algo]
    if column_seed is not None:
        if comm_mode != "dense" or grid.algo not in ("2d", "3d"):
            raise ValueError(f"Â's columns in a second order (--reorder double-random) run on dense 2d and 3d, "
                             f"not --comm {comm_mode} on {grid.algo}")
        return ColumnOrderedSpMM(cls, grid, comm, adj, seed=column_seed, dtype=dtype, parts=parts,
                                 cache_panels=cache_panels)
    if cls.moves_panels:
        return cls(grid, comm, adj, dtype=dtype, parts=parts, cache_panels=cache_panels)
    return cls(grid, comm, adj, dtype=dtype, parts=parts)
