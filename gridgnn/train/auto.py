"""What the planner adds to a training run: ``--algo auto`` and the predicted communication in the metrics.

Both price the run with `gridgnn.cost.epoch_model` on the exact block nnz of the graph being trained.
"""

from __future__ import annotations

import dataclasses

from gridgnn.config import TrainConfig, model_comms
from gridgnn.cost.epoch_model import predict_epoch
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.profile import default_profile
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import PreparedGraph
from gridgnn.grid.shape import GridShape
from gridgnn.plan import plan


def graph_stats(graph: Graph | PreparedGraph, model: str = "gcn") -> GraphStats:
    """Exact statistics (every entry of the operator of ``model``: Â for GCN, A for SAGE and GIN) of an
    in-memory or prepared graph; a prepared graph's memory-mapped operator (prepared for that model) is read
    in place, in chunks (no copy of its structure)."""
    if isinstance(graph, PreparedGraph):
        return GraphStats.from_graph(graph, normalized_adj=graph.norm_adj)
    return GraphStats.from_graph(graph, self_loops=model in ("gcn", "gat"))


def priced_order(config: TrainConfig, graph: Graph | PreparedGraph, world_size: int) -> Graph | PreparedGraph:
    """The graph `choose_configuration` prices: reordered by ``config.reorder`` into ``world_size`` parts when
    the choice depends on the order (sparse or automatic ``comm``, a reordering a loaded graph does not have
    yet), else ``graph`` itself. Deterministic. Not collective."""
    if (config.comm == "dense" or config.reorder == "none" or isinstance(graph, PreparedGraph)
            or graph.meta.get("reorder", "none") == config.reorder):
        return graph
    from gridgnn.data.reorder import reorder_graph  # sparse bytes depend on the order: price the reordered graph

    return reorder_graph(graph, config.reorder, world_size, config.seed)


def choose_configuration(config: TrainConfig, graph: Graph | PreparedGraph, world_size: int,
                         device_type: str = "cpu", *, on_grid: bool = False) -> tuple[TrainConfig, str]:
    """Resolve ``algo="auto"``: the configuration `gridgnn.plan.plan` ranks best for ``world_size``
    processes (priced with the machine profile of ``device_type``), and one line saying which and why.

    With ``comm="auto"`` the sparse variants compete too and the choice sets ``comm``; with a reordering and a
    sparse or automatic ``comm`` the graph is priced reordered (one METIS run into ``world_size`` parts: every
    grid's row blocks are whole parts, `gridgnn.cost.stages.row_blocks`).
    Deterministic, so every worker of a torchrun job reaches the same choice. One process means ``local``,
    or with ``on_grid`` (a launched worker, whose process group exists) a one-process ``1d`` grid.
    """
    if world_size == 1 and on_grid:
        return dataclasses.replace(config, algo="1d", grid=None, replication=1), \
            "--algo auto: one process in a launched group, so 1d on a 1-process grid"
    if world_size == 1:
        return dataclasses.replace(config, algo="local", grid=None, replication=1), \
            "--algo auto: one process, so local (no grid)"
    comms = model_comms(config.model, config.comm)
    priced = priced_order(config, graph, world_size)
    ranked = plan(config, graph_stats(priced, config.model), world_size, profile=default_profile(device_type),
                  comms=comms, cache_panels=config.cache_panels)
    best = ranked.best
    chosen = dataclasses.replace(config, algo=best.algo, comm=best.comm, **best.shape.config_fields())
    return chosen, f"--algo auto chose {ranked.reason}"


def choose_comm(config: TrainConfig, graph: Graph | PreparedGraph, shape: GridShape) -> tuple[TrainConfig, str]:
    """Resolve ``comm="auto"`` on ``shape``: ``sparse`` when the cost model says its busiest rank receives
    fewer bytes per training step than dense's, else ``dense``; and one line saying so. Deterministic."""
    if model_comms(config.model, "auto") == ("dense",):
        reason = f"--comm auto chose dense: --model {config.model} has no sparse variant"
        return dataclasses.replace(config, comm="dense"), reason
    stats = graph_stats(graph, config.model)
    most = {mode: int(predict_epoch(config, stats, shape, comm=mode, cache_panels=config.cache_panels).bytes.max())
            for mode in ("dense", "sparse")}
    choice = "sparse" if most["sparse"] < most["dense"] else "dense"
    reason = (f"--comm auto chose {choice}: busiest rank receives {most['sparse']:,} bytes per step sparse vs "
              f"{most['dense']:,} dense on {shape.algo} {shape.label()}")
    return dataclasses.replace(config, comm=choice), reason


def predicted_comm(config: TrainConfig, graph: Graph | PreparedGraph, shape: GridShape) -> tuple[dict, dict]:
    """The model's bytes and calls of one training step on every rank, by phase (the keys
    ``predicted_bytes``, ``predicted_calls``, ``predicted_by_phase``, ``predicted_calls_by_phase``), and of
    the set-up (``predicted_index_exchange_bytes`` / ``_calls``: per-rank lists, 0 for dense;
    ``predicted_panel_cache_bytes`` / ``_calls``: the Â panels of ``--cache-panels``, 0 without)."""
    prediction = predict_epoch(config, graph_stats(graph, config.model), shape, comm=config.comm,
                               cache_panels=config.cache_panels)
    return prediction.comm_dict(), {
        "predicted_index_exchange_bytes": prediction.setup_sum("bytes", "all_to_all").tolist(),
        "predicted_index_exchange_calls": prediction.setup_sum("calls", "all_to_all").tolist(),
        "predicted_panel_cache_bytes": prediction.setup_sum("bytes", "broadcast").tolist(),
        "predicted_panel_cache_calls": prediction.setup_sum("calls", "broadcast").tolist()}
