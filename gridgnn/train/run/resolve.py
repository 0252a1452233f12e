"""Resolving a run, once: ``--algo auto``, the grid shape, the vertex order and ``--comm auto``, into a
`gridgnn.run_spec.RunSpec`.

`resolve_run` is the one place a run is settled: the local launcher calls it once (and writes the spec for
its workers); a torchrun worker, or a one-process grid, calls it itself on the same graph, deterministically.
`resolve_auto` alone settles ``--algo auto`` for a run in one process. Not collective.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from gridgnn.config import ExecutionOptions, TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import PreparedGraph
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import GridShape, resolve_grid
from gridgnn.nn.message_passing import check_message_grid
from gridgnn.nn.models import check_edge_inputs, reads_edges
from gridgnn.plan.op_templates import spec_for
from gridgnn.train.loop.task_choice import settle_task
from gridgnn.train.run.auto import choose_comm, settle_execution

Say = Callable[[str], None]
"""Where a resolution's one-line reason goes (printed by rank 0 unless ``--quiet``)."""


def grid_shape_for(execution: ExecutionOptions, world_size: int) -> GridShape:
    """The validated grid of ``execution`` (a run's execution section, or its whole `TrainConfig`) on
    ``world_size`` processes (raises `ConfigError`; the rule that only 1.5d takes a replication factor is
    `ExecutionOptions.validate`'s; the others keep the default 1)."""
    return resolve_grid(execution.algo, world_size, replication=execution.replication, grid=execution.grid)


def resolve_auto(config: TrainConfig, graph: Graph | PreparedGraph | None, world_size: int, *,
                 on_grid: bool = False, device_type: str = "cpu", say: Say | None = None) -> TrainConfig:
    """`resolve_execution`'s configuration alone."""
    return resolve_execution(config, graph, world_size, on_grid=on_grid, device_type=device_type, say=say)[0]


def resolve_execution(config: TrainConfig, graph: Graph | PreparedGraph | None, world_size: int, *,
                      on_grid: bool = False, device_type: str = "cpu",
                      say: Say | None = None) -> tuple[TrainConfig, Graph | PreparedGraph | None]:
    """``config`` with every free execution option settled (``--algo auto``, ``--comm auto``, ``--reorder
    auto``, unset switches: `gridgnn.train.run.auto.choose_configuration`) and the reason in ``auto_reason``
    (passed to ``say``, with a note when pymetis would have let it price METIS orders); ``config`` itself
    when every option is pinned; and the graph in the chosen order as priced (None: the graph's own order,
    or nothing was priced)."""
    from gridgnn.config import ExecutionOptions
    from gridgnn.plan.execution import metis_note

    options = ExecutionOptions.of(config)
    if not options.free:
        return config, None
    chosen, reason, ordered = settle_execution(config, graph, world_size, device_type, on_grid=on_grid)
    if not reason:
        return chosen, None
    if say is not None:
        say(reason)
        if world_size > 1 and (note := metis_note(options)) is not None:
            say(note)
    return dataclasses.replace(chosen, auto_reason=reason), ordered


def resolve_comm(config: TrainConfig, graph: Graph | PreparedGraph, shape: GridShape, *,
                 say: Say | None = None) -> TrainConfig:
    """``config`` with ``--comm auto`` settled on ``shape`` (`gridgnn.train.run.auto.choose_comm`), its reason
    added to ``auto_reason`` (and passed to ``say``); ``config`` itself when its comm is given."""
    if config.comm != "auto":
        return config
    chosen, reason = choose_comm(config, graph, shape)
    if say is not None:
        say(reason)
    return dataclasses.replace(chosen, auto_reason="; ".join(filter(None, [config.auto_reason, reason])))


def resolve_run(config: TrainConfig, graph: Graph | PreparedGraph, world_size: int, *,
                shape: GridShape | None = None, on_grid: bool = True, device_type: str = "cpu",
                check: Callable[[TrainConfig, GridShape], None] | None = None,
                say: Say | None = None) -> tuple[TrainConfig, GridShape, Graph | PreparedGraph]:
    """A grid run settled on ``world_size`` processes: (configuration, grid shape, graph in the order it
    trains in). In order: its task and metric (`gridgnn.train.loop.task_choice.settle_task`; its line goes to
    ``say`` first); the free execution options on ``graph`` (`resolve_auto`: each vertex order priced
    as training would cut it); the grid shape (``shape`` when the caller validated it already:
    `grid_shape_for` runs once per run); ``check(config, shape)`` (the launcher's refusals, before any
    reordering); the vertex order (the graph as priced, else `reordered_for_grid`);
    a ``--comm auto`` still open (none after `resolve_auto`) on the reordered graph. Deterministic. Not
    collective."""
    check_edge_inputs(config, getattr(graph, "num_edge_features", 0))
    separable = reads_edges(config) and spec_for(config, graph).traced.messages_separable
    if reads_edges(config):  # before the planner prices the grids it can run
        check_message_grid(config.algo, f"--model {config.model}", separable)
    settled = settle_task(config, graph)
    if say is not None and settled is not config:
        say(settled.task_reason)
    config, ordered = resolve_execution(settled, graph, world_size, on_grid=on_grid, device_type=device_type,
                                        say=say)
    if shape is None:
        shape = grid_shape_for(config, world_size)
    if reads_edges(config):  # --algo auto chose among the grids that run the message only
        check_message_grid(shape.algo, f"--model {config.model}", separable)
    if check is not None:
        check(config, shape)
    graph = ordered if ordered is not None else reordered_for_grid(config, graph, shape)
    return resolve_comm(config, graph, shape, say=say), shape, graph


def reordered_for_grid(config: TrainConfig, graph: Graph | PreparedGraph, shape: GridShape):
    """``graph`` in the vertex order ``config.reorder`` asks (`gridgnn.data.reorder`), METIS cutting it into the
    grid's row blocks (on 3D each block again into its d depth sub-blocks: ``nest``); as is when it already has
    that order. A prepared folder made with another reordering is
    refused (`ConfigError`, one line): it cannot be reordered in place. Not collective (deterministic)."""
    from gridgnn.data.reorder import same_vertex_order, with_column_order

    have = graph.meta.get("reorder", "none")
    if have == config.reorder:
        return graph
    if same_vertex_order(have, config.reorder):  # random and double-random: only Â's column order differs
        return with_column_order(graph, config.reorder, config.seed)
    if isinstance(graph, PreparedGraph):
        raise ConfigError(f"prepared graph '{graph.folder}' was made with --reorder {have}, but --reorder "
                          f"{config.reorder} was asked: train with --reorder {have}, or prepare it again with "
                          f"--reorder {config.reorder}")
    from gridgnn.data.reorder import reorder_graph

    return reorder_graph(graph, config.reorder, shape.sizes[0], config.seed, nest=shape.depth)
