"""Training on a process grid: the `Trainer` loop with a rank's block of the data and `GridOps`.

Every rank builds the same model (same seed, so the same Glorot weights), computes its block of every
activation, and after the backward pass sums the weight gradients over the processes that hold distinct
parts (`GridOps.reduce_gradients`), so every rank applies the same Adam update and the replicated weights
stay identical. The loss is a mean over all training vertices of the graph: each rank divides its local sum
by the global count. Accuracies are global counts over global mask sizes.
"""

from __future__ import annotations

import resource
import time

import torch

from gridgnn.config import TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.data.shard import shard_node_data
from gridgnn.grid.comm import CommTotals
from gridgnn.nn import as_model_input, build_model, masked_cross_entropy
from gridgnn.parallel.grid_ops import GridOps
from gridgnn.train.trainer import Trainer


class DistributedTrainer(Trainer):
    """A `Trainer` whose model runs on one rank's blocks; collective on the whole grid."""

    def __init__(self, config: TrainConfig, graph: Graph, ops: GridOps):
        self.config, self.graph, self.agg, self.ops = config, graph, ops, ops
        shard = shard_node_data(graph, ops.row_range, ops.col_range(graph.num_features), ops.grid.device)
        self.features = _model_input(shard.features, ops, graph.num_features)
        self.labels, self.masks = shard.labels, shard.masks
        self.mask_totals = shard.mask_totals
        self.model = build_model(config, graph.num_features, graph.num_classes).to(ops.grid.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr,
                                          weight_decay=config.weight_decay)
        self.epoch_comm: list[dict] = []

    def train_step(self, epoch: int) -> float:
        """Forward, backward, gradient reduction and Adam step; returns the global training loss."""
        comm = self.ops.comm
        comm.reset()
        start = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        log_probs = self.model(self.features, self.ops, epoch=epoch)
        loss = masked_cross_entropy(log_probs, self.labels, self.masks[0], num_selected=self.mask_totals[0])
        loss.backward()
        self.ops.reduce_gradients(list(self.model.parameters()))
        self.optimizer.step()
        global_loss = self.ops.global_sum(loss.detach().double().reshape(1))
        records = comm.reset()
        self._record_step(CommTotals.of(records), time.perf_counter() - start)
        self.epoch_comm[-1]["by_axis"] = bytes_by_axis(records)
        return float(global_loss[0])

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float]:
        """Global (train, val, test) accuracy in eval mode; its communication is kept apart (``eval``)."""
        self.model.eval()
        log_probs = self.model(self.features, self.ops)
        predictions = log_probs.argmax(dim=1) == self.labels
        correct = torch.stack([predictions[m].sum() for m in self.masks]).double()
        correct = self.ops.global_sum(correct)
        self.epoch_comm[-1]["eval_bytes"] = sum(r.bytes for r in self.ops.comm.reset())
        return tuple(float(c) / max(t, 1) for c, t in zip(correct.tolist(), self.mask_totals, strict=True))

    def _record_step(self, totals: CommTotals, elapsed: float) -> None:
        self.epoch_comm.append({
            "bytes": totals.bytes, "calls": totals.calls, "by_phase": dict(totals.bytes_by_phase),
            "calls_by_phase": dict(totals.calls_by_phase), "comm_time_s": totals.seconds,
            "exposed_comm_time_s": totals.exposed_seconds,
            "compute_time_s": max(elapsed - totals.exposed_seconds, 0.0), "peak_memory_bytes": peak_memory_bytes(
                self.ops.grid.device),
        })


def _model_input(block, ops: GridOps, width: int):
    """The rank's feature block as model input: sparse on CPU when sparse enough, dense on the device."""
    if not isinstance(block, torch.Tensor) and ops.grid.device.type != "cpu":
        return torch.from_numpy(block.toarray()).to(ops.grid.device)
    if isinstance(block, torch.Tensor):
        return block
    rows = torch.arange(*ops.row_range)
    cols = torch.arange(*ops.col_range(width))
    return as_model_input(block, row_ids=rows, col_ids=cols)


PROC_STATUS, PROC_CLEAR_REFS = "/proc/self/status", "/proc/self/clear_refs"


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak for `peak_memory_bytes`: the CUDA allocator's on GPU; on Linux CPUs the resident set's
    high-water mark (VmHWM; writing 5 to /proc/self/clear_refs, Linux >= 4.0). Where that is not possible
    nothing changes, and the peak stays the whole process's."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open(PROC_CLEAR_REFS, "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        pass


def peak_memory_bytes(device: torch.device) -> int:
    """Peak memory of this process since the last `reset_peak_memory` (else since it started): the CUDA
    allocator's peak on GPU; on CPU the resident set's high-water mark (VmHWM on Linux, else ru_maxrss)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        with open(PROC_STATUS, encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def bytes_by_axis(records) -> dict[str, int]:
    """Bytes received per axis (``world`` included) over a list of `CommRecord`. Not collective."""
    out: dict[str, int] = {}
    for record in records:
        out[record.axis] = out.get(record.axis, 0) + record.bytes
    return out
