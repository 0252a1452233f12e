"""Workers for ``tests/spmm/test_attention_runs_its_plan.py``: one GAT layer's attention on a grid, without
overlap, every collective recorded in order."""

from __future__ import annotations

import spmm_workers as w
import torch
from cost_oracles import block_nnz

from gridgnn.cost.attention_plan import AttentionPlan, attention_schedule
from gridgnn.cost.stages import stage_layout
from gridgnn.cost.terms import feature_widths
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import resolve_grid
from gridgnn.spmm.attention import attention
from gridgnn.spmm.registry import build_spmm


def attention_case(rank: int, world_size: int, cases: list[tuple], n: int, seed: int, heads: int,
                   channels: int) -> list[dict]:
    """For each (algo, replication, grid, cache) case: the attention's output block and its records, in order,
    as (phase, op, axis, bytes)."""
    out = []
    adj = w.random_directed(n, seed=seed)
    width = heads * channels
    generator = torch.Generator().manual_seed(seed)
    x_global = torch.randn(n, width, generator=generator)
    s_dst, s_src = torch.randn(n, heads, generator=generator), torch.randn(n, heads, generator=generator)
    g_global = torch.randn(n, width, generator=generator)
    for algo, replication, grid_text, cached in cases:
        shape = resolve_grid(algo, world_size, replication=replication, grid=grid_text)
        grid = ProcessGrid.create(shape, w.test_device())
        comm = Communicator(grid, overlap=False)
        op = build_spmm(grid, comm, adj, cache_panels=(False,) if cached else ())
        stages = op.attention_stages()
        comm.reset()
        r0, r1 = op.row_range
        x = op.local_slice(x_global).requires_grad_(True)
        y = attention(x, s_dst[r0:r1].clone().requires_grad_(True), s_src[r0:r1].clone().requires_grad_(True),
                      stages, heads=heads, width=width)
        y.backward(op.local_slice(g_global))
        records = [(r.phase, r.op, r.axis, r.bytes) for r in comm.reset()]
        out.append({"records": records, "width": y.shape[1]})
    return out


def plan_for(shape, adj, rank: int, width: int, heads: int, cached: bool) -> AttentionPlan:
    """The attention plan of ``rank`` for a layer of ``heads`` heads and global width ``width`` on ``adj``."""
    layout = stage_layout(shape.algo, shape.sizes, adj.shape[0])
    coords = shape.coords(rank)
    nnz = block_nnz(adj, layout.row_bounds, layout.segments)[coords["row"]] if shape.splits_features else None
    local = int(feature_widths(width, shape.col_blocks)[coords.get("col", 0)])
    return attention_schedule(shape, layout, coords, local, heads, nnz, cached)
