"""Training on a process grid: the `Trainer` with a rank's block of the node data and `GridOps` as its layout.

Construction and step are the `Trainer`'s: every rank builds the same model (same seed, so the same Glorot
weights), computes its block of every activation, and after the backward pass the layout sums the weight
gradients over the processes that hold distinct parts (`GridOps.reduce_gradients`), so every rank applies the
same Adam update and the replicated weights stay identical. The loss is a mean over the present target
entries of all training vertices of the graph: each rank divides its local sum by the global count
(`loss_entries`). Every split's metric is computed from global sums (`gridgnn.train.loop.task_metrics`).
What this class adds: the rank's rows of the node data, and each step's communication record.
"""

from __future__ import annotations

import resource
import time

import torch

from gridgnn.config import TrainConfig
from gridgnn.data.graph import Graph
from gridgnn.data.shard import LocalShard, shard_node_data
from gridgnn.grid.comm import CommTotals
from gridgnn.nn.features import SparseFeatures
from gridgnn.parallel.grid_ops import GridOps
from gridgnn.sparse.cut import csr_structure
from gridgnn.train.loop.trainer import Trainer


class DistributedTrainer(Trainer):
    """A `Trainer` whose model runs on one rank's blocks; collective on the whole grid. ``epoch_comm``: one
    record of each training step's communication (bytes, calls, phases, axes, times, peak memory)."""

    def __init__(self, config: TrainConfig, graph: Graph, ops: GridOps):
        self.ops = ops
        super().__init__(config, graph, ops)
        self.epoch_comm: list[dict] = []
        if isinstance(self.features, SparseFeatures):  # 1D/1.5D --defer-weight-gather reduces feature weights by rows
            ops.set_feature_pattern(*csr_structure(graph.features), graph.num_features)

    def node_data(self, graph: Graph) -> LocalShard:
        """This rank's block of the node data (rows `GridOps.row_range`, feature columns ``input_range``)."""
        ops = self.ops
        return shard_node_data(graph, ops.row_range, ops.input_range(graph.num_features), ops.device)

    def train_step(self, epoch: int) -> float:
        """`Trainer.train_step`, its communication recorded in ``epoch_comm``; returns the global loss."""
        comm = self.ops.comm
        comm.reset()
        start = time.perf_counter()
        loss = super().train_step(epoch)
        records = comm.reset()
        self._record_step(CommTotals.of(records), time.perf_counter() - start)
        self.epoch_comm[-1]["by_axis"] = bytes_by_axis(records)
        return loss

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float]:
        """`Trainer.evaluate`; its communication is kept apart (``eval_bytes``)."""
        accuracies = super().evaluate()
        self.epoch_comm[-1]["eval_bytes"] = sum(r.bytes for r in self.ops.comm.reset())
        return accuracies

    def _after_gather(self) -> None:
        """A gather of whole weights (`Trainer.gather_parameters`, ``gather_best_state``: between steps, after
        the evaluation) is added to the last epoch's ``gather_bytes``."""
        gathered = sum(r.bytes for r in self.ops.comm.reset())
        if self.epoch_comm:
            self.epoch_comm[-1]["gather_bytes"] = self.epoch_comm[-1].get("gather_bytes", 0) + gathered

    def _record_step(self, totals: CommTotals, elapsed: float) -> None:
        self.epoch_comm.append({
            "bytes": totals.bytes, "calls": totals.calls, "by_phase": dict(totals.bytes_by_phase),
            "calls_by_phase": dict(totals.calls_by_phase), "comm_time_s": totals.seconds,
            "exposed_comm_time_s": totals.exposed_seconds,
            "compute_time_s": max(elapsed - totals.exposed_seconds, 0.0), "peak_memory_bytes": peak_memory_bytes(
                self.ops.grid.device),
        })


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
