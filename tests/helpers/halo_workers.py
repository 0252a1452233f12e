"""Workers for ``tests/cost/test_halo_plan.py``: one halo exchange (`gridgnn.parallel.edge_halo.EdgeHalo`) forward
and backward on a grid, without overlap, every collective recorded in order."""

from __future__ import annotations

import spmm_workers as w
import torch

from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.spmm_plan import lower
from gridgnn.cost.stages import stage_layout
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import resolve_grid
from gridgnn.parallel.edge_halo import EdgeHalo
from gridgnn.partition import block_bounds


def stats_of(adj) -> GraphStats:
    """Exact statistics of ``adj``'s pattern."""
    return GraphStats("halo", adj.shape[0], adj.nnz, 1, 1, None, adj.indptr, adj.indices)


def halo_case(rank: int, world_size: int, cases: list[tuple], n: int, seed: int, width: int) -> list[dict]:
    """Per case: the source rows the exchange delivers (and what they should be), its records forward and
    backward as (op, axis, bytes), and the lowering of the executor's own plan."""
    adj = w.random_directed(n, seed=seed)
    x_global = torch.randn(n, width, generator=torch.Generator().manual_seed(seed))
    out = []
    for algo, replication, grid_text in cases:
        shape = resolve_grid(algo, world_size, replication=replication, grid=grid_text)
        grid = ProcessGrid.create(shape, w.test_device())
        comm = Communicator(grid, overlap=False)
        layout = stage_layout(algo, shape.sizes, n)
        halo = EdgeHalo(comm, adj, layout)
        comm.reset()
        i = grid.index("row")
        r0, r1 = layout.row_bounds[i], layout.row_bounds[i + 1]
        if shape.depth > 1:  # the rank's rows: its sub-block S[i][l]
            s = i * shape.depth + grid.index("depth")
            r0, r1 = layout.segment(s)
        cols = block_bounds(width, shape.col_blocks, allow_empty=True, what="columns")
        j = grid.index("col") if shape.splits_features else 0
        x = x_global[r0:r1, cols[j]:cols[j + 1]].clone().requires_grad_(True)
        rows = halo.source_rows(x)
        forward = comm.reset()
        rows.backward(torch.ones_like(rows))
        backward = comm.reset()
        local = cols[j + 1] - cols[j]
        expected = x_global[halo.edges.source_ids.cpu(), cols[j]:cols[j + 1]]
        out.append({"rows": rows.detach().numpy(), "expected_rows": expected.numpy(),
                    "records": [[(r.op, r.axis, r.bytes) for r in half] for half in (forward, backward)],
                    "own_plan": [[(s.op, s.axis, s.bytes) for s in lower(halo.plan(local, b), shape, grid.coords)]
                                 for b in (False, True)]})
    return out
