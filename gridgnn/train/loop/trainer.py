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

from gridgnn.config import LOWER_IS_BETTER, TrainConfig, TrainingOptions
from gridgnn.data.graph import Graph
from gridgnn.data.shard import LocalShard
from gridgnn.data.targets import present_entries, standardization, target_block
from gridgnn.errors import ConfigError
from gridgnn.nn import as_model_input, build_model, operator_of
from gridgnn.nn.features import SparseFeatures, stays_sparse
from gridgnn.nn.gcn import Aggregation
from gridgnn.nn.layout import Layout, as_layout, input_ids
from gridgnn.nn.loss import masked_task_loss
from gridgnn.train.loop.early_stop import ValidationTracker
from gridgnn.train.loop.lr_schedule import LRSchedule
from gridgnn.train.loop.task_choice import task_of
from gridgnn.train.loop.task_metrics import SplitRows, resolve_metric, split_metrics


@dataclass
class EpochRecord:
    """One epoch: training loss (before the step), the metric on each split after the step (eval mode; None
    for an epoch ``--eval-every`` did not evaluate), step time, and ``lr``: the learning rate the step used
    (None in records of checkpoints written before it was recorded). ``train_metric``/``val_metric``/
    ``test_metric``: the run's metric (`gridgnn.train.loop.task_metrics`); ``train_acc``/``val_acc``/``test_acc``:
    the same accuracies for a multiclass task, None otherwise (and absent from `to_dict`, unless ``accuracy``).
    A record read from a file written before metrics existed has only the accuracies: they are its metric.
    ``comm_bytes``: on a grid, the bytes rank 0 moved in the step, for the printed lines only (not part of
    `to_dict`: the metrics file holds every rank's)."""

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
    lr: float | None = None
    accuracy: bool | None = field(default=None, compare=False, repr=False)
    """Whether the run's metric is accuracy (its records carry the ``*_acc`` keys, null when not evaluated);
    None: whether the accuracies were given."""

    def __post_init__(self) -> None:
        if self.train_metric is None and self.val_metric is None and self.val_acc is not None:
            self.train_metric, self.val_metric, self.test_metric = self.train_acc, self.val_acc, self.test_acc
        if self.accuracy is None:
            self.accuracy = self.val_acc is not None or self.val_metric is None

    @classmethod
    def from_dict(cls, record: dict) -> EpochRecord:
        """A record as `to_dict` wrote it (a metrics file's, a checkpoint's; unknown keys: TypeError)."""
        return cls(**record, accuracy="train_acc" in record)

    def to_dict(self) -> dict:
        out = {k: v for k, v in vars(self).items() if k not in ("comm_bytes", "accuracy")}
        if not self.accuracy:
            for key in ACC_KEYS:
                out.pop(key)
        return out


ACC_KEYS = ("train_acc", "val_acc", "test_acc")
RECORD_FIELDS = tuple(f.name for f in fields(EpochRecord) if f.name not in ("comm_bytes", "accuracy"))
"""The keys an epoch record may have in a metrics file or checkpoint."""


@dataclass
class TrainResult:
    """All epoch records plus the best-validation epoch (the first epoch reaching the best validation value of
    ``metric``, highest or lowest for an error, as `gridgnn.train.loop.early_stop.ValidationTracker` judges; 0 before
    any evaluation), the first epoch whose loss was NaN or infinite (None while every loss is finite), whether
    training stopped there (``config.stop_on_nonfinite``), and whether ``--patience`` stopped it early
    (``stopped_early``: after its last record)."""

    epochs: list[EpochRecord] = field(default_factory=list)
    best_epoch: int = 0
    metric: str = "accuracy"
    first_nonfinite_epoch: int | None = None
    stopped_on_nonfinite: bool = False
    best_state: dict | None = field(default=None, repr=False, compare=False)
    """The model's ``state_dict`` after ``best_epoch`` (CPU copies); None when that epoch was trained before
    a resume. With ``--defer-weight-gather``, during `Trainer.fit` only each rank's column blocks of the
    sliced parameters are current until `Trainer.gather_best_state` (at a checkpoint, at the end of fit)."""
    stopped_early: bool = False

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
        run adds ``history_mean_epoch_time_s``, the mean over every epoch. ``stopped_early`` says whether
        ``--patience`` ended the run, ``stopped_at_epoch`` at which epoch (null otherwise); ``final_lr`` is
        the learning rate of the last epoch's step."""
        last = self.epochs[-1]
        best = self.epochs[self.best_epoch - 1] if self.best_epoch else None
        ran = self.epochs[since:]
        final = {
            "metric": self.metric,
            "train_metric": last.train_metric,
            "val_metric": last.val_metric,
            "test_metric": last.test_metric,
            "best_val_metric": best.val_metric if best else None,
            "test_metric_at_best_val": best.test_metric if best else None,
        }
        if self.metric == "accuracy":  # multiclass: the accuracy keys every earlier tool reads
            final.update(train_acc=last.train_acc, val_acc=last.val_acc, test_acc=last.test_acc,
                         best_val_acc=best.val_acc if best else None,
                         test_acc_at_best_val=best.test_acc if best else None)
        final.update({
            "best_epoch": best.epoch if best else None,
            "mean_epoch_time_s": sum(r.time_s for r in ran) / len(ran) if ran else None,
            "timed_epochs": len(ran),
            "first_nonfinite_epoch": self.first_nonfinite_epoch,
            "stopped_on_nonfinite": self.stopped_on_nonfinite,
            "stopped_early": self.stopped_early,
            "stopped_at_epoch": last.epoch if self.stopped_early else None,
            "final_lr": last.lr,
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


def build_optimizer(model: nn.Module, training: TrainingOptions) -> torch.optim.Adam:
    """Adam with ``training.lr`` and ``training.weight_decay`` (a run's training section, or its whole
    `TrainConfig`) on every parameter of ``model``, in one parameter group (see the module docstring). Not
    collective."""
    return torch.optim.Adam(model.parameters(), lr=training.lr, weight_decay=training.weight_decay)


def model_input(block: np.ndarray | sp.spmatrix | Tensor, layout: Layout, width: int,
                sparse: bool | None = None) -> Tensor | SparseFeatures:
    """This process's feature block (the ``input_range(width)`` columns of its rows) as model input:
    `SparseFeatures` on CPU when sparse enough (``sparse``: as decided on the whole graph,
    `gridgnn.nn.features.stays_sparse`; dropout draws by the layout's global row and column ids), else a dense
    tensor on the layout's device. Not collective."""
    if isinstance(block, Tensor):
        return block
    if layout.device.type != "cpu":
        dense = block.toarray() if sp.issparse(block) else np.ascontiguousarray(block, dtype=np.float32)
        return torch.from_numpy(dense).to(layout.device)
    cpu = torch.device("cpu")
    rows, cols = input_ids(layout, width, cpu)
    return as_model_input(block, row_ids=rows, col_ids=cols, sparse=sparse)


def whole_graph(graph: Graph, device: torch.device | str = "cpu") -> LocalShard:
    """The node data of every row of ``graph``: features as they are (no copy; `model_input` places them),
    targets ((n,) or (n, T): `gridgnn.data.targets`) and the three masks (n,) on ``device``, the layout's.
    Not collective."""
    arrays = (graph.train_mask, graph.val_mask, graph.test_mask)
    masks = tuple(torch.from_numpy(m).to(device) for m in arrays)
    return LocalShard(graph.features, torch.from_numpy(target_block(graph.labels)).to(device), masks,
                      tuple(int(m.sum()) for m in arrays))


def target_standardization(graph: Graph, task: str) -> tuple[list[float], list[float]]:
    """``--standardize-targets``: the (shift, scale) of the graph's regression targets
    (`gridgnn.data.targets.standardization`, over the whole graph's training entries: alike on every rank);
    `ConfigError` for another task."""
    if task != "regression":
        raise ConfigError(f"--standardize-targets standardizes regression targets; graph '{graph.name}' holds "
                          f"{task} targets")
    return standardization(graph.labels, graph.train_mask)


def loss_entries(graph: Graph) -> int:
    """The loss's divisor: the present target entries of the training vertices, over the whole graph (one
    per training vertex for a multiclass task)."""
    if graph.task == "multiclass":
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
        # sparse or dense as the whole graph is, alike on every rank (a block's own density may differ)
        self.features = model_input(data.features, self.layout, graph.num_features, stays_sparse(graph.features))
        self.labels, self.masks, self.mask_totals = data.labels, list(data.masks), data.mask_totals
        self.task = task_of(config, graph)
        self.metric = resolve_metric(config.metric, self.task)
        self.loss_count = loss_entries(graph)
        self.split_rows = (SplitRows.of(graph.labels, [graph.train_mask, graph.val_mask, graph.test_mask],
                                        self.layout.row_range, self.layout.device)
                           if self.metric == "rocauc" else None)
        self.model = build_model(config, graph.num_features, graph.num_classes, self.task,
                                 num_edge_features=getattr(graph, "num_edge_features", 0)).to(self.layout.device)
        self.loss_scale = None
        if config.standardize_targets:
            shift, scale = target_standardization(graph, self.task)
            self.model.for_task(self.task, shift, scale)
            self.loss_scale = torch.tensor(scale, dtype=torch.float32, device=self.layout.device)
        self.optimizer = build_optimizer(self.model, config)
        self.tracker = ValidationTracker(patience=config.patience, higher_is_better=self.metric not in LOWER_IS_BETTER)
        """Judges the validation value of the metric for the best epoch, patience and ``plateau``."""
        self.schedule = LRSchedule(config, self.optimizer)
        self._best_whole = True  # whether a best state copied in fit is whole (see gather_best_state)

    def node_data(self, graph: Graph) -> LocalShard:
        """The node data of the layout's rows: the whole graph on one process, on the layout's device (a
        `LocalSpMM` on CUDA trains there). Not collective."""
        return whole_graph(graph, self.layout.device)

    def train_step(self, epoch: int) -> float:
        """One forward/backward/gradient reduction/Adam step in training mode; returns the training loss,
        the mean over the graph's present target entries of its training vertices (`loss_entries`)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        output = self.model(self.features, self.layout, epoch=epoch)
        loss = masked_task_loss(output, self.labels, self.masks[0], self.task, num_selected=self.loss_count,
                                scale=self.loss_scale)
        loss.backward()
        params = list(self.model.parameters())
        self.layout.reduce_gradients(params)
        self.optimizer.step()
        self.layout.after_step(params)
        return float(self.layout.global_sum(loss.detach().double().reshape(1))[0])

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float]:
        """(train, val, test) values of the run's metric for the current weights in eval mode (no dropout),
        over the whole graph (`gridgnn.train.loop.task_metrics.split_metrics`: collective on the world)."""
        self.model.eval()
        output = self.model(self.features, self.layout)
        return tuple(split_metrics(output, self.labels, self.masks, self.task, self.metric, self.layout,
                                   self.split_rows))

    def epoch_record(self, epoch: int, loss: float, time_s: float, lr: float | None = None,
                     evaluate: bool = True) -> EpochRecord:
        """The record of ``epoch``: its loss, step time and learning rate, and (when ``evaluate``) the metric
        on each split now (`evaluate`; None otherwise); the accuracies again under their own keys for a
        multiclass task."""
        values = self.evaluate() if evaluate else (None, None, None)
        accuracies = values if self.metric == "accuracy" else (None, None, None)
        return EpochRecord(epoch, loss, *accuracies, time_s=time_s, train_metric=values[0],
                           val_metric=values[1], test_metric=values[2], lr=lr, accuracy=self.metric == "accuracy")

    def fit(self, on_epoch: Callable[[EpochRecord], None] | None = None, *, start: TrainResult | None = None,
            rng_state: torch.Tensor | None = None,
            after_epoch: Callable[[int, TrainResult], None] | None = None) -> TrainResult:
        """Train up to ``config.epochs`` epochs, evaluating after every ``config.eval_every``-th and the last
        (and after one whose loss stops the run); ``on_epoch`` sees every new record.

        ``start`` holds the epochs a checkpoint already trained (the model, optimizer, ``tracker`` and
        ``schedule`` are restored by the caller) and ``rng_state`` the torch RNG state saved with them;
        training goes on from the next epoch. ``after_epoch(epoch, result)`` runs after each epoch's record
        and the schedule's step (e.g. to save a checkpoint). With ``config.stop_on_nonfinite`` training ends
        after the first epoch whose loss is NaN or infinite (at once when ``start`` already holds one); with
        ``config.patience`` once the tracker's patience ran out (at once when it had in ``start``). The loss
        and the split metrics are global, so every rank stops alike and steps the same schedule.
        """
        result = start if start is not None else TrainResult(metric=self.metric)
        result.metric = self.metric
        if result.note_nonfinite() and self.config.stop_on_nonfinite:
            result.stopped_on_nonfinite = True
            return result
        if result.epochs and self.tracker.stopped:
            result.stopped_early = True
            return result
        with deterministic(self.config.seed):
            if rng_state is not None:
                torch.set_rng_state(rng_state)
            for epoch in range(len(result.epochs) + 1, self.config.epochs + 1):
                lr = self.schedule.lr
                start = time.perf_counter()
                loss = self.train_step(epoch)
                elapsed = time.perf_counter() - start
                last = epoch == self.config.epochs or (not math.isfinite(loss) and self.config.stop_on_nonfinite)
                evaluate = last or epoch % self.config.eval_every == 0
                record = self.epoch_record(epoch, loss, elapsed, lr, evaluate)
                result.epochs.append(record)
                stop = not math.isfinite(loss) and result.note_nonfinite() and self.config.stop_on_nonfinite
                if evaluate and self.tracker.update(record.val_metric, epoch):
                    result.best_epoch = epoch
                    result.best_state = {k: v.detach().to("cpu", copy=True) for k, v in
                                         self.model.state_dict().items()}
                    self._best_whole = not self.layout.defer_gather  # else gathered when read: gather_best_state
                self.schedule.step(evaluate, self.tracker)
                result.stopped_on_nonfinite = stop
                result.stopped_early = evaluate and self.tracker.stopped
                if on_epoch is not None:
                    on_epoch(record)
                if after_epoch is not None:
                    after_epoch(epoch, result)
                if stop or result.stopped_early:
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
        """Runs after each gather of whole weights (`gridgnn.train.loop.distributed.DistributedTrainer` records
        its bytes)."""
