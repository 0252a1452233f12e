"""The evaluation metric of each task, computed exactly on any layout.

=============  =============================  ======================================================
task           ``--metric`` (first: default)  definition over a split's present target entries
=============  =============================  ======================================================
multiclass     accuracy                       share of vertices whose argmax is their class
multilabel     rocauc, micro-f1               rocauc: mean over targets with both classes present of
                                              each target's ROC-AUC (OGB's evaluator); micro-f1: F1 of
                                              the pooled 0/1 decisions (logit > 0)
regression     mse, mae, r2                   mean squared / absolute error; r2: mean over targets of
                                              1 - SSE / SST (targets with SST = 0 skipped)
=============  =============================  ======================================================

Every metric but ``rocauc`` is a ratio of sums over vertices, so each process sums its rows and one
``global_sum`` (collective on the world, phase ``loss``) gives the graph's sums. ROC-AUC ranks all of a
split's scores at once: each process writes its rows' scores into a zero array of the split's size (float64,
so that the division by row replicas in ``global_sum`` returns each float32 score exactly) and the
summed array is the whole split's on every process. That costs 8 bytes per split vertex and target per
evaluation, counted with the evaluation's bytes. A metric with nothing to score (an empty split, no target
with both classes) is 0.0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import rankdata
from torch import Tensor

from gridgnn.config import METRICS
from gridgnn.errors import ConfigError


def resolve_metric(metric: str, task: str) -> str:
    """``metric`` for ``task``: ``auto`` -> the task's default; one the task cannot score -> `ConfigError`."""
    if metric == "auto":
        return METRICS[task][0]
    if metric not in METRICS[task]:
        raise ConfigError(f"--metric {metric} does not score a {task} task (choose from "
                          f"{', '.join(METRICS[task])})")
    return metric


@dataclass
class SplitRows:
    """Where this process's rows sit in each split, for metrics that need every score of a split (rocauc).

    ``positions[k]``: int64 (s_k,) the index within split k (0 train, 1 val, 2 test: the vertices of the
    split in vertex order) of each of this process's rows the split selects, in row order; ``sizes[k]``: the
    split's global size; ``targets[k]``: the split's canonical targets, whole (size_k, T) float."""

    positions: list[Tensor]
    sizes: list[int]
    targets: list[np.ndarray]

    @classmethod
    def of(cls, labels: np.ndarray, masks: list[np.ndarray], row_range: tuple[int, int], device) -> SplitRows:
        """From the graph's canonical ``labels`` and its three global bool masks (n,); this process holds rows
        ``row_range``. Not collective."""
        r0, r1 = row_range
        positions, sizes, targets = [], [], []
        for mask in masks:
            index = np.cumsum(mask) - 1
            mine = index[r0:r1][mask[r0:r1]]
            positions.append(torch.from_numpy(np.ascontiguousarray(mine, dtype=np.int64)).to(device))
            sizes.append(int(mask.sum()))
            targets.append(np.asarray(labels[mask], dtype=np.float64))
        return cls(positions, sizes, targets)


def split_metrics(output: Tensor, targets: Tensor, masks: list[Tensor], task: str, metric: str, layout,
                  rows: SplitRows | None = None) -> list[float]:
    """``metric`` on each of the three splits of this process's ``output`` rows (m, C) against canonical
    ``targets`` (m,) or (m, T) and bool ``masks`` (m,); ``layout`` sums over the graph (`Layout.global_sum`,
    collective on the world). ``rows``: required for ``rocauc``."""
    if metric == "rocauc":
        return _rocauc(output, masks, layout, rows)
    stats = torch.cat([_sums(output, targets, mask, task, metric) for mask in masks])
    totals = layout.global_sum(stats).tolist()
    width = len(totals) // len(masks)
    return [_finish(metric, totals[k * width:(k + 1) * width]) for k in range(len(masks))]


def _sums(output: Tensor, targets: Tensor, mask: Tensor, task: str, metric: str) -> Tensor:
    """This process's sufficient statistics of ``metric`` over the rows ``mask`` selects (float64 (k,))."""
    dtype = torch.float64
    if metric == "accuracy":
        correct = (output[mask].argmax(dim=1) == targets[mask]).sum()
        return torch.stack([correct.to(dtype), mask.sum().to(dtype)])
    predicted, actual = output[mask].to(dtype), targets[mask].to(dtype)
    present = ~torch.isnan(actual)
    if metric == "micro-f1":
        decided, truth = predicted > 0, actual == 1
        tp = (decided & truth & present).sum()
        fp = (decided & ~truth & present).sum()
        fn = (~decided & truth & present).sum()
        return torch.stack([tp, fp, fn]).to(dtype)
    error = torch.where(present, predicted - actual, torch.zeros((), dtype=dtype))
    count = present.sum().to(dtype)
    if metric == "mse":
        return torch.stack([(error ** 2).sum(), count])
    if metric == "mae":
        return torch.stack([error.abs().sum(), count])
    value = torch.where(present, actual, torch.zeros((), dtype=dtype))  # r2: per target column
    return torch.cat([(error ** 2).sum(0), value.sum(0), (value ** 2).sum(0), present.sum(0).to(dtype)])


def _finish(metric: str, sums: list[float]) -> float:
    """The metric from its global sufficient statistics (`_sums`)."""
    if metric in ("accuracy", "mse", "mae"):
        return sums[0] / sums[1] if sums[1] else 0.0
    if metric == "micro-f1":
        tp, fp, fn = sums
        return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    columns = len(sums) // 4
    sse, total, squares, count = (np.asarray(sums[k * columns:(k + 1) * columns]) for k in range(4))
    with np.errstate(divide="ignore", invalid="ignore"):
        sst = squares - np.where(count > 0, total ** 2 / np.maximum(count, 1), 0.0)
    scored = (count > 0) & (sst > 1e-12 * np.maximum(squares, 1e-300))
    return float(np.mean(1 - sse[scored] / sst[scored])) if scored.any() else 0.0


def _rocauc(output: Tensor, masks: list[Tensor], layout, rows: SplitRows | None) -> list[float]:
    """Each split's ROC-AUC from its whole score matrix (see the module docstring). Collective on the world."""
    if rows is None:
        raise ValueError("rocauc needs the split positions of this process's rows (SplitRows)")
    width = output.shape[1]
    pieces = []
    for mask, positions, size in zip(masks, rows.positions, rows.sizes, strict=True):
        scores = torch.zeros(size, width, dtype=torch.float64, device=output.device)
        scores[positions] = output[mask].to(torch.float64)
        pieces.append(scores.reshape(-1))
    whole = layout.global_sum(torch.cat(pieces)).cpu().numpy()
    values, offset = [], 0
    for size, targets in zip(rows.sizes, rows.targets, strict=True):
        scores = whole[offset:offset + size * width].reshape(size, width)
        offset += size * width
        values.append(mean_rocauc(targets.reshape(size, width), scores))
    return values


def mean_rocauc(targets: np.ndarray, scores: np.ndarray) -> float:
    """The mean ROC-AUC over the columns of ``targets`` (n, T) in {0, 1, NaN} that hold both classes among
    their present entries, ``scores`` (n, T) ranking them (OGB's ogbn-proteins evaluator); 0.0 when no column
    qualifies. Each column's AUC is the Mann-Whitney statistic with tied scores sharing their mean rank."""
    aucs = []
    for column in range(targets.shape[1]):
        present = ~np.isnan(targets[:, column])
        truth, score = targets[present, column], scores[present, column]
        positives = int((truth == 1).sum())
        negatives = truth.size - positives
        if positives == 0 or negatives == 0:
            continue
        ranks = rankdata(score)
        aucs.append((ranks[truth == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))
    return float(np.mean(aucs)) if aucs else 0.0
