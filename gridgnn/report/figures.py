"""The report's panels drawn with matplotlib (the ``plots`` extra), from a `ReportSeries`.

Each panel is one function that draws on a given Axes, so the same panel goes into one PNG (`report_figure`:
every panel of the run on one figure, two columns) or into a page of one image per panel (`panel_figures`).
Figures are built with `matplotlib.figure.Figure` and the Agg canvas: no pyplot state, no display needed.
Panels: loss, accuracies (per evaluated epoch); step time split (per epoch: the step, its computation, the
communication not hidden behind it and all communication, max over ranks); on a grid, each rank's mean
computation and exposed communication (stacked bars), bytes per rank per phase (heat map, mean per epoch)
and measured against predicted step bytes per rank (bars). Not collective.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable

from gridgnn.errors import ConfigError
from gridgnn.limits import human_bytes
from gridgnn.report.series import ReportSeries

PLOTS_EXTRA = "pip install 'gridgnn[plots]'"


def require_matplotlib() -> None:
    """Raise `ConfigError` (one line naming the extra) when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(f"gridgnn report draws with matplotlib, which is not installed: {PLOTS_EXTRA}") from None


def _epoch_axis(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")


def draw_loss(ax, series: ReportSeries) -> None:
    ax.plot(series.epochs, series.loss, label="training loss", color="C3")
    ax.set(title="Training loss", ylabel="loss")
    _epoch_axis(ax)


def draw_accuracy(ax, series: ReportSeries) -> None:
    for name, values in (("train", series.train_acc), ("val", series.val_acc), ("test", series.test_acc)):
        kept = [(e, v) for e, v in zip(series.epochs, values, strict=True) if not math.isnan(v)]  # --eval-every
        ax.plot([e for e, _ in kept], [v for _, v in kept], label=name, marker="." if len(kept) < 30 else None)
    if series.metric == "accuracy":
        ax.set(title="Accuracy", ylabel="accuracy", ylim=(-0.02, 1.02))
    else:
        ax.set(title=series.metric, ylabel=series.metric)
    _epoch_axis(ax)
    ax.legend(loc="lower right")


def draw_epoch_times(ax, series: ReportSeries) -> None:
    ax.plot(series.epochs, [1000 * t for t in series.time_s], label="step", color="k")
    grid = series.grid
    if grid is not None:
        for key, label in (("compute_time_s", "computation"), ("exposed_comm_time_s", "communication, exposed"),
                           ("comm_time_s", "communication, all")):
            ax.plot(grid.epochs, [1000 * t for t in getattr(grid, key)], label=label)
    ax.set(title="Step time" + (" (max over ranks)" if grid is not None else ""), ylabel="ms")
    _epoch_axis(ax)
    ax.legend(loc="upper right")


def draw_rank_times(ax, series: ReportSeries) -> None:
    grid = series.grid
    ranks = list(range(grid.world_size))
    compute, exposed = ([1000 * t for t in times] for times in (grid.rank_compute_s, grid.rank_exposed_comm_s))
    ax.bar(ranks, compute, label="computation")
    ax.bar(ranks, exposed, bottom=compute, label="communication, exposed")
    top = max(c + e for c, e in zip(compute, exposed, strict=True))
    ax.set(title="Step time per rank (mean per epoch)", xlabel="rank", ylabel="ms", xticks=ranks,
           ylim=(0, 1.3 * top if top > 0 else 1))
    ax.legend(loc="upper right")


def draw_bytes_heatmap(ax, series: ReportSeries) -> None:
    grid = series.grid
    phases = list(grid.phase_bytes)
    matrix = [grid.phase_bytes[phase] for phase in phases]
    image = ax.imshow(matrix, aspect="auto", cmap="viridis")
    ax.figure.colorbar(image, ax=ax, label="bytes per epoch")
    ax.set(title="Bytes received per rank per phase (mean per epoch)", xlabel="rank",
           xticks=range(grid.world_size), yticks=range(len(phases)), yticklabels=phases)
    if grid.world_size * len(phases) <= 64:  # small grids: the numbers in the cells
        top = max(max(row) for row in matrix)
        for row, values in enumerate(matrix):
            for rank, value in enumerate(values):
                ax.text(rank, row, human_bytes(value), ha="center", va="center", fontsize=7,
                        color="k" if value > 0.6 * top else "w")


def draw_predicted(ax, series: ReportSeries) -> None:
    grid = series.grid
    ranks = list(range(grid.world_size))
    ax.bar([r - 0.2 for r in ranks], grid.measured_bytes, width=0.4, label="measured")
    ax.bar([r + 0.2 for r in ranks], grid.predicted_bytes, width=0.4, label="predicted")
    top = max(grid.measured_bytes + grid.predicted_bytes)
    ax.set(title="Step bytes per rank (mean per epoch)", xlabel="rank", ylabel="bytes", xticks=ranks,
           ylim=(0, 1.3 * top if top > 0 else 1))
    ax.legend(loc="upper right")


Panel = tuple[str, Callable]


def panels(series: ReportSeries) -> list[Panel]:
    """(name, draw function) of every panel ``series`` has data for, in report order."""
    chosen: list[Panel] = [("loss", draw_loss), ("accuracy", draw_accuracy), ("step_time", draw_epoch_times)]
    grid = series.grid
    if grid is None:
        return chosen
    if grid.rank_compute_s is not None:
        chosen.append(("rank_time", draw_rank_times))
    if grid.phase_bytes:
        chosen.append(("bytes_by_phase", draw_bytes_heatmap))
    if grid.predicted_bytes is not None:
        chosen.append(("predicted_bytes", draw_predicted))
    return chosen


def report_figure(series: ReportSeries):
    """One `Figure` with every panel (two columns), titled with ``series.title``."""
    from matplotlib.figure import Figure

    chosen = panels(series)
    rows = (len(chosen) + 1) // 2
    figure = Figure(figsize=(13, 4.2 * rows), layout="constrained")
    figure.suptitle(series.title)
    for index, (_, draw) in enumerate(chosen):
        draw(figure.add_subplot(rows, 2, index + 1), series)
    return figure


def panel_figures(series: ReportSeries) -> list[tuple[str, object]]:
    """(name, `Figure`) for each panel, one panel per figure."""
    from matplotlib.figure import Figure

    drawn = []
    for name, draw in panels(series):
        figure = Figure(figsize=(7.5, 4.2), layout="constrained")
        draw(figure.add_subplot(), series)
        drawn.append((name, figure))
    return drawn


def png_bytes(figure, dpi: int = 100) -> bytes:
    """``figure`` rendered as PNG."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
