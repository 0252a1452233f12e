"""The message-passing component of the memory model (`gridgnn.cost.halo_cost.halo_memory_bytes`), term by term
on records built by hand (measured against real runs in the slow `tests/cost/test_epoch_model.py`)."""

from __future__ import annotations

import numpy as np
import spmm_workers as w

from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.halo_cost import edge_counts, halo_memory_bytes, halo_row_counts
from gridgnn.cost.operations import LayerOps, ModelOps, SourceRows
from gridgnn.cost.rank_cost import shape_blocks
from gridgnn.cost.spmm_cost import FLOAT32
from gridgnn.grid.shape import resolve_grid

N = 61


def test_message_memory_adds_kept_values_over_layers_and_one_layers_temporaries():
    """`halo_memory_bytes`: a layer's kept per-edge values add to every other layer's, its temporaries count
    only when they are the widest; a record that states no counts takes two arrays of its width each."""
    adj = w.random_directed(N, seed=5)
    stats = GraphStats("test", N, adj.nnz, 4, 2, None, adj.indptr, adj.indices)
    blocks = shape_blocks(resolve_grid("1d", 3), stats)

    def memory(*layers: tuple[int, int | None, int | None]) -> np.ndarray:
        ops = ModelOps("sum", False, tuple(
            LayerOps(k, width, width, (SourceRows(width, True, edge_values=kept, edge_temporaries=held),))
            for k, (width, kept, held) in enumerate(layers)), (), ())
        return halo_memory_bytes(blocks, ops, FLOAT32)

    edges, halo = edge_counts(blocks), halo_row_counts(blocks)[0]
    rows = np.diff(np.asarray(blocks.row_bounds))[blocks.coords["row"]] + halo  # source rows of one halo
    one = memory((8, 5, 7))
    assert (one == edges * 16 + rows * 8 * 4 + edges * (5 + 7) * 4).all()
    two = memory((8, 5, 7), (8, 3, 2))  # a second layer adds its kept values and source rows, not its temporaries
    assert (two - one == rows * 8 * 4 + edges * 3 * 4).all()
    wide = memory((8, 5, 7), (8, 3, 20))  # ... unless its temporaries are the widest
    assert (wide - one == rows * 8 * 4 + edges * (3 + 20 - 7) * 4).all()
    assert (memory((8, None, None)) == memory((8, 16, 16))).all()  # the default: two arrays of the width each
