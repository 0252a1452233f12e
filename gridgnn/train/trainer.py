"""The single-process training loop: the reference every distributed run is compared with.

Optimizer: Adam with weight decay on **all** parameters (weights and biases of every layer). Kipf & Welling
and PyG's example decay only the first layer; both reach the published accuracy here (Cora, seeds 0-4:
81.7 % either way; Amazon Photo, 4 seeds: the same within 0.5 %), and decaying everything keeps one
parameter group, which every process of a distributed run applies identically.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor, nn

from gridgnn.config import TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.data.shard import LocalShard
from gridgnn.data.targets import present_entries, target_block
from gridgnn.nn import as_model_input, build_model, operator_of
from gridgnn.nn.features import SparseFeatures
from gridgnn.nn.gcn import Aggregation
from gridgnn.nn.layout import Layout, as_layout, input_ids
from gridgnn.nn.loss import masked_task_loss
from gridgnn.train.task_choice import task_of
from gridgnn.train.task_metrics import SplitRows, better, resolve_metric, split_metrics


@dataclass
class EpochRecord:
    """One epoch: training loss (before the step), the metric on each split after the step (eval mode), step
    time. ``train_metric``/``val_metric``/``test_metric``: the run's metric (`gridgnn.train.task_metrics`);
    ``train_acc``/``val_acc``/``test_acc``: the same accuracies for a multiclass task, None otherwise (and
    absent from `to_dict`). A record read from a file written before metrics existed has only the accuracies:
    they are its metric. ``comm_bytes``: on a grid, the bytes rank 0 moved in the step, for the printed lines
    only (not part of `to_dict`: the metrics file holds every rank's)."""

    epoch: int
    loss: float
    train_acc: float | None = None
    val_acc: float | None = None
    test_acc: float | None = None
    time_s: float = 0.0
    train_metric: float | None = None
    val_metric: float | None = None
    test_metric: float | None = None
    comm_bytes: int | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.train_metric is None and self.val_metric is None and self.val_acc is not None:
            self.train_metric, self.val_metric, self.test_metric = self.train_acc, self.val_acc, self.test_acc

    def to_dict(self) -> dict:
        out = {k: v for k, v in vars(self).items() if k != "comm_bytes"}
        if self.val_acc is None:
            for key in ACC_KEYS:
                out.pop(key)
        return out


ACC_KEYS = ("train_acc", "val_acc", "test_acc")
METRIC_KEYS = ("train_metric", "val_metric", "test_metric")
RECORD_FIELDS = tuple(f.name for f in fields(EpochRecord) if f.name != "comm_bytes")
"""The keys an epoch record may have in a metrics file or checkpoint."""


@dataclass
class TrainResult:
    """All epoch records plus the best-validation epoch (the first epoch reaching the best validation value of
    ``metric``: highest, lowest for an error),
    the first epoch whose loss was NaN or infinite (None while every loss is finite), and whether training
    stopped there (``config.stop_on_nonfinite``)."""

    epochs: list[EpochRecord] = field(default_factory=list)
    best_epoch: int = 0
    metric: str = "accuracy"
    first_nonfinite_epoch: int | None = None
    stopped_on_nonfinite: bool = False
    best_state: dict | None = field(default=None, repr=False, compare=False)
    """The model's ``state_dict`` after ``best_epoch`` (CPU copies); None when that epoch was trained before
    a resume. With ``--defer-weight-gather``, during `Trainer.fit` only each rank's column blocks of the
    sliced parameters are current until `Trainer.gather_best_state` (at a checkpoint, at the end of fit)."""

    def note_nonfinite(self) -> bool:
        """Record the first epoch with a non-finite loss among the records; True when there is one."""
        if self.first_nonfinite_epoch is None:
            self.first_nonfinite_epoch = next(
                (r.epoch for r in self.epochs if not math.isfinite(r.loss)), None)
        return self.first_nonfinite_epoch is not None

    def final(self, since: int = 0) -> dict:
        """The ``final`` object of the metrics file. Times cover the epochs this invocation ran: those after
        the first ``since`` (the epoch a resumed run started from, whose earlier epochs may have run on
        another grid): ``mean_epoch_time_s`` (null when none ran) over ``timed_epochs`` epochs; a resumed
        run adds ``history_mean_epoch_time_s``, the mean over every epoch."""
        last = self.epochs[-1]
        best = self.epochs[self.best_epoch - 1]
        ran = self.epochs[since:]
        final = {
            "metric": self.metric,
            "train_metric": last.train_metric,
            "val_metric": last.val_metric,
            "test_metric": last.test_metric,
            "best_val_metric": best.val_metric,
            "test_metric_at_best_val": best.test_metric,
        }
        if last.val_acc is not None:  # multiclass: the accuracy keys every earlier tool reads
            final.update(train_acc=last.train_acc, val_acc=last.val_acc, test_acc=last.test_acc,
                         best_val_acc=best.val_acc, test_acc_at_best_val=best.test_acc)
        final.update({
            "best_epoch": best.epoch,
            "mean_epoch_time_s": sum(r.time_s for r in ran) / len(ran) if ran else None,
            "timed_epochs": len(ran),
            "first_nonfinite_epoch": self.first_nonfinite_epoch,
            "stopped_on_nonfinite": self.stopped_on_nonfinite,
        })
        if since:
            final["history_mean_epoch_time_s"] = sum(r.time_s for r in self.epochs) / len(self.epochs)
        return final


@contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """Seed torch and ask for deterministic kernels (warn-only) for the duration; restores the setting."""
    previous = torch.are_deterministic_algorithms_enabled()
    previous_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=previous_warn)


def build_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Adam:
    """Adam with ``config.lr`` and ``config.weight_decay`` on every parameter of ``model``, in one parameter
    group (see the module docstring). Not collective."""
    return torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)


def model_input(block: np.ndarray | sp.spmatrix | Tensor, layout: Layout, width: int) -> Tensor | SparseFeatures:
    """This process's feature block (the ``input_range(width)`` columns of its rows) as model input:
    `SparseFeatures` on CPU when sparse enough (dropout draws by the layout's global row and column ids), else
    a dense tensor on the layout's device. Not collective."""
    if isinstance(block, Tensor):
        return block
    if layout.device.type != "cpu":
        dense = block.toarray() if sp.issparse(block) else np.ascontiguousarray(block, dtype=np.float32)
        return torch.from_numpy(dense).to(layout.device)
    cpu = torch.device("cpu")
    rows, cols = input_ids(layout, width, cpu)
    return as_model_input(block, row_ids=rows, col_ids=cols)


def whole_graph(graph: Graph, device: torch.device | str = "cpu") -> LocalShard:
    """The node data of every row of ``graph``: features as they are (no copy; `model_input` places them),
    targets ((n,) or (n, T): `gridgnn.data.targets`) and the three masks (n,) on ``device``, the layout's.
    Not collective."""
    arrays = (graph.train_mask, graph.val_mask, graph.test_mask)
    masks = tuple(torch.from_numpy(m).to(device) for m in arrays)
    return LocalShard(graph.features, torch.from_numpy(target_block(graph.labels)).to(device), masks,
                      tuple(int(m.sum()) for m in arrays))


def loss_entries(graph: Graph) -> int:
    """The loss's divisor: the present target entries of the training vertices, over the whole graph (one
    per training vertex for a multiclass task)."""
    if getattr(graph, "task", "multiclass") == "multiclass":
        return int(graph.train_mask.sum())
    return int(present_entries(graph.labels, graph.task)[graph.train_mask].sum())


class Trainer:
    """Trains the model ``config.model`` on ``graph`` with the layout ``agg`` (a `gridgnn.nn.layout.Layout`,
    or a plain ``x -> M x`` with M the model's operator, shape (n, f) -> (n, f)).

    One construction and one step for every layout: the layout's rows of the node data (`node_data`), the
    model on the layout's device, `build_optimizer`; a step reduces the gradients and sums the loss through
    the layout (`gridgnn.nn.layout.Layout.reduce_gradients`, ``global_sum``: the identity on one process).
    The caller builds ``agg`` from the model's operator (see `gridgnn.train.build_aggregation`). Epochs
    are numbered from 1; the epoch number also selects the dropout masks. Collective on the layout's grid.
    """

    def __init__(self, config: TrainConfig, graph: Graph, agg: Layout | Aggregation):
        self.config, self.graph = config, graph
        self.layout = as_layout(agg, operator_of(config.model), graph.num_nodes)
        self.layout.set_vertex_order(graph.meta.get("reorder_order"))  # dropout by a reordered graph's old ids
        data = self.node_data(graph)
        self.features = model_input(data.features, self.layout, graph.num_features)
        self.labels, self.masks, self.mask_totals = data.labels, list(data.masks), data.mask_totals
        self.task = task_of(config, graph)
        self.metric = resolve_metric(config.metric, self.task)
        self.loss_count = loss_entries(graph)
        self.split_rows = (SplitRows.of(graph.labels, [graph.train_mask, graph.val_mask, graph.test_mask],
                                        self.layout.row_range, self.layout.device)
                           if self.metric == "rocauc" else None)
        self.model = build_model(config, graph.num_features, graph.num_classes, self.task).to(self.layout.device)
        self.optimizer = build_optimizer(self.model, config)
        self._best_whole = True  # whether a best state copied in fit is whole (see gather_best_state)

    def node_data(self, graph: Graph) -> LocalShard:
        """The node data of the layout's rows: the whole graph on one process, on the layout's device (a
        `LocalSpMM` on CUDA trains there). Not collective."""
        return whole_graph(graph, self.layout.device)

    def train_step(self, epoch: int) -> float:
        """One forward/backward/gradient reduction/Adam step in training mode; returns the training loss,
        a mean over every training vertex of the graph."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        output = self.model(self.features, self.layout, epoch=epoch)
        loss = masked_task_loss(output, self.labels, self.masks[0], self.task, num_selected=self.loss_count)
        loss.backward()
        self.layout.reduce_gradients(list(self.model.parameters()))
        self.optimizer.step()
        return float(self.layout.global_sum(loss.detach().double().reshape(1))[0])

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float]:
        """(train, val, test) values of the run's metric for the current weights in eval mode (no dropout),
        over the whole graph (`gridgnn.train.task_metrics.split_metrics`: collective on the world)."""
        self.model.eval()
        output = self.model(self.features, self.layout)
        return tuple(split_metrics(output, self.labels, self.masks, self.task, self.metric, self.layout,
                                   self.split_rows))

    def epoch_record(self, epoch: int, loss: float, time_s: float) -> EpochRecord:
        """The record of ``epoch``: its loss and step time, and the metric on each split now (`evaluate`);
        the accuracies again under their own keys for a multiclass task."""
        values = self.evaluate()
        accuracies = values if self.metric == "accuracy" else (None, None, None)
        return EpochRecord(epoch, loss, *accuracies, time_s=time_s, train_metric=values[0],
                           val_metric=values[1], test_metric=values[2])

    def fit(self, on_epoch: Callable[[EpochRecord], None] | None = None, *, start: TrainResult | None = None,
            rng_state: torch.Tensor | None = None,
            after_epoch: Callable[[int, TrainResult], None] | None = None) -> TrainResult:
        """Train up to ``config.epochs`` epochs, evaluating after each; ``on_epoch`` sees every new record.

        ``start`` holds the epochs a checkpoint already trained (the model and optimizer are restored by
        the caller) and ``rng_state`` the torch RNG state saved with them; training goes on from the next
        epoch. ``after_epoch(epoch, result)`` runs after each epoch's record (e.g. to save a checkpoint).
        With ``config.stop_on_nonfinite`` training ends after the first epoch whose loss is NaN or infinite
        (at once when ``start`` already holds one); the loss is global, so every rank stops alike.
        """
        result = start if start is not None else TrainResult(metric=self.metric)
        result.metric = self.metric
        best_val = result.epochs[result.best_epoch - 1].val_metric if result.epochs else None
        if result.note_nonfinite() and self.config.stop_on_nonfinite:
            result.stopped_on_nonfinite = True
            return result
        with deterministic(self.config.seed):
            if rng_state is not None:
                torch.set_rng_state(rng_state)
            for epoch in range(len(result.epochs) + 1, self.config.epochs + 1):
                start = time.perf_counter()
                loss = self.train_step(epoch)
                elapsed = time.perf_counter() - start
                record = self.epoch_record(epoch, loss, elapsed)
                result.epochs.append(record)
                if better(self.metric, record.val_metric, best_val):
                    best_val, result.best_epoch = record.val_metric, epoch
                    result.best_state = {k: v.detach().to("cpu", copy=True) for k, v in
                                         self.model.state_dict().items()}
                    self._best_whole = not self.layout.defer_gather  # else gathered when read: gather_best_state
                stop = not math.isfinite(loss) and result.note_nonfinite() and self.config.stop_on_nonfinite
                result.stopped_on_nonfinite = stop
                if on_epoch is not None:
                    on_epoch(record)
                if after_epoch is not None:
                    after_epoch(epoch, result)
                if stop:
                    break
        self.gather_parameters()  # the trained weights whole, and the best ones, for whatever reads them next
        self.gather_best_state(result)
        return result

    def gather_parameters(self, optimizer_state: bool = False) -> None:
        """The layout's `gridgnn.nn.layout.Layout.gather_parameters` on the model (and with
        ``optimizer_state`` Adam's moments): whole parameters where steps updated only column blocks
        (``--defer-weight-gather``). Collective on the layout's ``col`` axis there; call it alike on every rank."""
        self.layout.gather_parameters(list(self.model.parameters()), self.optimizer if optimizer_state else None)
        self._after_gather()

    def gather_best_state(self, result: TrainResult) -> None:
        """Make ``result.best_state`` whole where it was copied from partly stale parameters
        (`gridgnn.nn.layout.Layout.defer_gather`): its column blocks gathered in place. Collective on the
        layout's ``col`` axis then (every rank holds the same best epoch: validation accuracy is global);
        else nothing to do."""
        if result.best_state is None or self._best_whole:
            return
        named = dict(self.model.named_parameters())
        keys = [k for k in result.best_state if k in named]
        copies = [result.best_state[k].to(self.layout.device) for k in keys]
        self.layout.gather_parameters([named[k] for k in keys], copies=copies)
        result.best_state.update({k: c.to("cpu") for k, c in zip(keys, copies, strict=True)})
        self._best_whole = True
        self._after_gather()

    def _after_gather(self) -> None:
        """Runs after each gather of whole weights (`gridgnn.train.distributed.DistributedTrainer` records
        its bytes)."""
