"""What the planner adds to a training run: ``--algo auto`` and the predicted communication in the metrics.

Both price the run with `gridgnn.cost.epoch_model` on the exact block nnz of the graph being trained.
"""

from __future__ import annotations

import dataclasses

from gridgnn.config import TrainConfig, model_comms
from gridgnn.config.choices import COVER_ALGOS
from gridgnn.cost.epoch_model import predict_run
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import PreparedGraph
from gridgnn.grid.shape import GridShape
from gridgnn.nn.models import self_loops_of
from gridgnn.plan.op_templates import spec_for


def graph_stats(graph: Graph | PreparedGraph, model: str = "gcn") -> GraphStats:
    """Exact statistics (every entry of the operator of ``model``: Â for GCN, A for SAGE and GIN) of an
    in-memory or prepared graph; a prepared graph's memory-mapped operator (prepared for that model) is read
    in place, in chunks (no copy of its structure)."""
    if isinstance(graph, PreparedGraph):
        return GraphStats.from_graph(graph, normalized_adj=graph.norm_adj)
    return GraphStats.from_graph(graph, self_loops=self_loops_of(model))


def choose_configuration(config: TrainConfig, graph: Graph | PreparedGraph, world_size: int,
                         device_type: str = "cpu", *, on_grid: bool = False) -> tuple[TrainConfig, str]:
    """`settle_execution` without the graph: (settled configuration, reason)."""
    chosen, reason, _ = settle_execution(config, graph, world_size, device_type, on_grid=on_grid)
    return chosen, reason


def settle_execution(config: TrainConfig, graph: Graph | PreparedGraph, world_size: int,
                     device_type: str = "cpu", *, on_grid: bool = False) -> tuple[TrainConfig, str, object]:
    """Settle the free execution options of ``config`` (``--algo auto``, ``--comm auto``, ``--reorder auto``,
    unset switches: `gridgnn.plan.execution`) for ``world_size`` processes, priced with ``config.profile``
    or the machine profile of ``device_type``; returns the settled configuration and one line saying what was
    chosen and why.

    Every combination of the free options around the pinned ones is priced on ``graph`` in each vertex order
    it would train on (`gridgnn.plan.execution.choose_execution`). Deterministic, so every worker of a
    torchrun job reaches the same choice. One process means ``local`` (or with ``on_grid``, a launched worker
    whose process group exists, a one-process ``1d`` grid), where nothing moves: dense, natural order, every
    switch off.
    """
    from gridgnn.config import ExecutionOptions
    from gridgnn.plan.execution import choose_execution

    options = ExecutionOptions.of(config)
    if world_size == 1:
        fields = options.settled_locally()
        if config.algo not in ("auto", "local"):  # a one-process grid: resolve_comm settles comm on its shape
            fields.pop("comm", None)
        settled = dataclasses.replace(config, **fields)
        if config.algo != "auto":
            return settled, "", None
        if on_grid:
            return dataclasses.replace(settled, algo="1d", grid=None, replication=1), \
                "--algo auto: one process in a launched group, so 1d on a 1-process grid", None
        return dataclasses.replace(settled, algo="local", grid=None, replication=1), \
            "--algo auto: one process, so local (no grid)", None
    chosen, ranked, ordered = choose_execution(config, graph, world_size, device_type)
    head = "--algo auto chose" if config.algo == "auto" else f"--algo {config.algo}: the planner chose"
    free = ", ".join(name.replace("_", "-") for name in options.free if name != "algo")
    why = f" (free: {free})" if free else ""
    return chosen, f"{head} {ranked.reason}{why}", ordered


def choose_comm(config: TrainConfig, graph: Graph | PreparedGraph, shape: GridShape) -> tuple[TrainConfig, str]:
    """Resolve ``comm="auto"`` on ``shape``: of ``dense``, ``sparse`` and (1D, 1.5D) ``cover``, the one whose
    busiest rank the cost model says receives the fewest bytes per training step (ties to the plainer, in that
    order); and one line saying so. Deterministic."""
    if model_comms(config.model, "auto") == ("dense",):
        reason = f"--comm auto chose dense: --model {config.model} has no sparse variant"
        return dataclasses.replace(config, comm="dense"), reason
    stats = graph_stats(graph, config.model)
    spec = spec_for(config, stats)
    modes = [mode for mode in model_comms(config.model, "auto") if mode != "cover" or shape.algo in COVER_ALGOS]
    most = {mode: int(predict_run(spec, stats, shape, config, comm=mode).bytes.max()) for mode in modes}
    choice = min(modes, key=lambda mode: most[mode])  # the first of the fewest: the plainest
    others = ", ".join(f"{most[mode]:,} {mode}" for mode in modes if mode != choice)
    reason = (f"--comm auto chose {choice}: busiest rank receives {most[choice]:,} bytes per step against "
              f"{others} on {shape.algo} {shape.label()}")
    return dataclasses.replace(config, comm=choice), reason


def predicted_comm(config: TrainConfig, graph: Graph | PreparedGraph, shape: GridShape) -> tuple[dict, dict]:
    """The model's bytes and calls of one training step on every rank, by phase (the keys
    ``predicted_bytes``, ``predicted_calls``, ``predicted_by_phase``, ``predicted_calls_by_phase``), and of
    the set-up (``predicted_index_exchange_bytes`` / ``_calls``: per-rank lists, 0 for dense;
    ``predicted_panel_cache_bytes`` / ``_calls``: the Â panels of ``--cache-panels``, 0 without)."""
    stats = graph_stats(graph, config.model)
    prediction = predict_run(spec_for(config, stats), stats, shape, config)
    return prediction.comm_dict(), {
        "predicted_index_exchange_bytes": prediction.setup_sum("bytes", "all_to_all").tolist(),
        "predicted_index_exchange_calls": prediction.setup_sum("calls", "all_to_all").tolist(),
        "predicted_panel_cache_bytes": prediction.setup_sum("bytes", "broadcast").tolist(),
        "predicted_panel_cache_calls": prediction.setup_sum("calls", "broadcast").tolist()}
