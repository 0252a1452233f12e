"""Counted collectives: every byte gridgnn moves between processes goes through `Communicator`.

Byte convention (docs/architecture.md §3, the bandwidth term; a rank never counts data it already holds). For a payload
of ``m`` bytes on an axis group of ``p`` processes:

================  =========================================================================
broadcast         ``m`` to each non-root, 0 to the root
reduce (sum)      ``m`` to each non-root (the transpose of a broadcast), 0 to the root
all-reduce        ``2 * m * (p - 1) // p`` to every process
all-gather        ``(p - 1) * chunk`` to every process, ``chunk`` the (padded) per-process part
reduce-scatter    ``(p - 1) * chunk`` to every process
all-to-all        the bytes this process receives from the others (its own part is never sent)
================  =========================================================================

All-gather and reduce-scatter pad every part to the largest one (NCCL and gloo need equal parts), and the
padding is counted: it is really sent. A collective on a group of one process is skipped and not recorded.

Wire precision (``--comm-precision``, `gridgnn.grid.wire`). In the phases of `WIRE_PHASES`, a float32 payload
of ``n`` rows of ``w`` values travels as ``n`` encoded rows of ``wire_row_bytes(precision, w)`` bytes (``m``
below is then the encoded size), and every received value is rounded once. Where a collective leaves the
same tensor on every process (a blocking broadcast, an all-gather, an all-reduce), every process, the sender
included, holds the decoded values, so replicas stay identical (1.5D's replicas compute the same weight
gradients); an asynchronous broadcast (a stage of a pipeline, consumed by the receivers only) leaves the root
its exact rows. Nothing is summed in low precision: the receiver decodes and adds in float32, so the sums are
carried as other collectives:

================  =========================================================================
reduce (sum)      an all-to-all of the encoded parts to the root, summed there; recorded as ``reduce``, counted
                  as above (``m`` to each non-root, 0 to the root)
reduce-scatter    an all-to-all: part k of every other process to process k, unpadded; recorded as
                  ``all_to_all``, ``(p - 1) * rows_k`` encoded rows to process k
all-reduce (sum)  that reduce-scatter over ``p`` balanced row chunks (`gridgnn.partition.block_bounds`), then
                  an all-gather of the summed chunks: two records, ``all_to_all`` and ``all_gather``
all-reduce (max)  unchanged, in float32 (a softmax's shift: small, and exact in any precision)
================  =========================================================================

Inside `Communicator.float32_values` nothing is encoded: a norm's row sums (one value per row, whose squares
overflow float16: `gridgnn.cost.column_steps`) travel as plain float32 collectives in every precision.

Records (`CommRecord`, `CommTotals`, `PHASES`) are `gridgnn.grid.comm_records`; the overlap scheduler
(`Pending`, `InFlight`, `pipeline`), which issues these collectives asynchronously and waits for them behind
the computation, is `gridgnn.grid.overlap`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist

from gridgnn.config.choices import COMM_PRECISIONS
from gridgnn.cost.spmm_cost import wire_row_bytes
from gridgnn.errors import CollectiveError
from gridgnn.grid.comm_records import PHASES, WIRE_PHASES, CommRecord, CommTotals
from gridgnn.grid.overlap import InFlight, Pending, pipeline
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.wire import decode, encode
from gridgnn.partition import block_bounds, block_sizes
from gridgnn.peer_errors import first_line, is_out_of_memory, peer_failure_text

# torch 2.13 renamed the equal-part collectives; older releases (>= 2.4) only have the first names.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

class Communicator:
    """Collectives on the axes of a `ProcessGrid`, each recorded with the current phase tag.

    ``overlap`` (default on): `pipeline` issues the next stage's collectives before the caller computes
    with the current one, and `InFlight` keeps one collective running behind the computation. The same
    collectives run in the same order either way, so results and counts are identical.

    ``precision`` (`COMM_PRECISIONS`, default ``fp32``: every collective as it is) is the wire precision of
    float32 payloads in `WIRE_PHASES` (the module docstring says how each collective carries it), outside a
    `float32_values` block; ``seed`` seeds int8's stochastic rounding (one generator per process, offset by
    its rank), so a run is reproducible.
    """

    def __init__(self, grid: ProcessGrid, overlap: bool = True, precision: str = "fp32", seed: int = 0):
        if precision not in COMM_PRECISIONS:
            raise ValueError(f"comm precision must be one of {', '.join(COMM_PRECISIONS)}; got {precision!r}")
        self.grid = grid
        self.overlap = overlap
        self.precision = precision
        self.seed = seed
        self.records: list[CommRecord] = []
        self._phase = "other"
        self._float32 = False
        self._generator: torch.Generator | None = None

    def pipeline(self, stages: Iterable, issue: Callable[[object], object]) -> Iterator[tuple]:
        """`gridgnn.grid.overlap.pipeline` with this communicator's ``overlap``: yields ``(stage, results)``,
        ``issue(stage)`` starting that stage's collectives. Every process of the groups involved must iterate
        the same stages."""
        return pipeline(stages, issue, self.overlap)

    def in_flight(self) -> InFlight:
        """An `InFlight` for collectives issued behind the computation (see there)."""
        return InFlight(self.overlap)

    def encoded(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` travels in the wire precision now: a float32 payload in a `WIRE_PHASES` phase of a
        run whose precision is not fp32, outside `float32_values` (index sets, Â panels and other dtypes never
        are)."""
        return (self.precision != "fp32" and self._phase in WIRE_PHASES and tensor.dtype == torch.float32
                and tensor.dim() >= 1 and not self._float32)

    def _encode(self, tensor: torch.Tensor) -> torch.Tensor:
        """(n, ...) float32 -> (n, bytes per row) uint8 in this run's precision (rows: the first dimension)."""
        if self._generator is None and self.precision == "int8":
            self._generator = torch.Generator(device=tensor.device)
            self._generator.manual_seed(self.seed * 1_000_003 + self.grid.rank)
        return encode(tensor.reshape(tensor.shape[0], _row_width(tensor)), self.precision, self._generator)

    def _decode(self, data: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """`_encode`'s bytes back to float32 rows shaped as ``like`` (without its first dimension)."""
        row_shape = tuple(like.shape[1:])
        return decode(data, self.precision, math.prod(row_shape)).reshape((data.shape[0],) + row_shape)

    @property
    def current_phase(self) -> str:
        """The phase tag collectives issued now are recorded with (`phase`)."""
        return self._phase

    def lost_peer(self, op: str, axis: str, error: RuntimeError) -> CollectiveError:
        """The one-line `CollectiveError` for collective ``op`` on ``axis`` that failed with ``error``; an
        allocation failure of this process is raised as it is instead (this rank ran out of memory and says
        so, exit 2: no peer is to blame)."""
        if is_out_of_memory(error):
            raise error
        return CollectiveError(peer_failure_text(f"{op} on axis '{axis}' (rank {self.grid.rank})",
                                                 first_line(error, 200)))

    def _issue(self, op: str, axis: str, nbytes: int, tensor: torch.Tensor, call,
               then: Callable[[torch.Tensor], object] | None = None) -> Pending:
        """Start ``call(group, async_op=True)``; a group of one process gives an already finished `Pending`."""
        if self.grid.size(axis) == 1:
            return Pending(self, None, op, axis, 0, tensor, then)
        try:
            work = call(self.grid.group(axis))
        except RuntimeError as error:
            raise self.lost_peer(op, axis, error) from error
        return Pending(self, work, op, axis, nbytes, tensor, then)

    def broadcast_async(self, tensor: torch.Tensor, axis: str, root: int,
                        then: Callable[[torch.Tensor], object] | None = None) -> Pending:
        """Asynchronous `broadcast`; the `Pending` delivers ``then(tensor)`` (default ``tensor``)."""
        if self.encoded(tensor) and self.grid.size(axis) > 1:
            return self._broadcast_encoded(tensor, axis, root, then)
        nbytes = 0 if self.grid.index(axis) == root else _nbytes(tensor)
        return self._issue("broadcast", axis, nbytes, tensor,
                           lambda g: dist.broadcast(tensor, group=g, group_src=root, async_op=True), then)

    def _broadcast_encoded(self, tensor: torch.Tensor, axis: str, root: int,
                           then: Callable[[torch.Tensor], object] | None, round_root: bool = False) -> Pending:
        """`broadcast_async` in the wire precision: the root sends its rows encoded (``round_root``: and
        replaces its ``tensor`` by what the others receive; else keeps it exact); the others decode into
        ``tensor`` once the bytes arrived."""
        is_root = self.grid.index(axis) == root
        if is_root:
            data = self._encode(tensor)
            if round_root:
                tensor.copy_(self._decode(data, tensor))
        else:
            width = _row_width(tensor)
            data = torch.empty((tensor.shape[0], wire_row_bytes(self.precision, width)), dtype=torch.uint8,
                               device=tensor.device)

        def received(_data: torch.Tensor) -> object:
            if not is_root:
                tensor.copy_(self._decode(data, tensor))
            return then(tensor) if then is not None else tensor

        return self._issue("broadcast", axis, 0 if is_root else _nbytes(data), data,
                           lambda g: dist.broadcast(data, group=g, group_src=root, async_op=True), received)

    def reduce_async(self, tensor: torch.Tensor, axis: str, root: int) -> Pending:
        """Asynchronous `reduce`: the sum lands in the root's ``tensor`` once waited for."""
        if self.encoded(tensor) and self.grid.size(axis) > 1:
            return self._reduce_encoded(tensor, axis, root)
        nbytes = 0 if self.grid.index(axis) == root else _nbytes(tensor)
        return self._issue("reduce", axis, nbytes, tensor,
                           lambda g: dist.reduce(tensor, group=g, group_dst=root, async_op=True))

    def _reduce_encoded(self, tensor: torch.Tensor, axis: str, root: int) -> Pending:
        """`reduce_async` in the wire precision: every non-root sends its encoded part to the root (an
        all-to-all with one non-empty part), which adds the decoded parts to its own in float32, in group
        order. Recorded as a ``reduce`` of the encoded bytes at each non-root."""
        p, me = self.grid.size(axis), self.grid.index(axis)
        rows = tensor.shape[0]
        width = _row_width(tensor)
        if me == root:
            send = torch.empty((0, wire_row_bytes(self.precision, width)), dtype=torch.uint8, device=tensor.device)
            send_rows, recv_rows = [0] * p, [0 if k == root else rows for k in range(p)]
        else:
            send = self._encode(tensor)
            send_rows, recv_rows = [rows if k == root else 0 for k in range(p)], [0] * p
        received = send.new_empty((sum(recv_rows), send.shape[1]))

        def summed(_data: torch.Tensor) -> torch.Tensor:
            if me == root:
                for part in torch.split(received, [r for r in recv_rows if r]):
                    tensor.add_(self._decode(part, tensor))
            return tensor

        nbytes = 0 if me == root else _nbytes(send)
        return self._issue("reduce", axis, nbytes, received,
                           lambda g: dist.all_to_all_single(received, send, recv_rows, send_rows, group=g,
                                                            async_op=True), summed)

    def all_to_all_async(self, send: torch.Tensor, send_rows: list[int], recv_rows: list[int], axis: str,
                         then: Callable[[torch.Tensor], object] | None = None) -> Pending:
        """Asynchronous all-to-all with uneven parts (`dist.all_to_all_single`), collective on ``axis``.

        ``send`` holds ``send_rows[p]`` rows for process p of the group, concatenated in group order; the
        `Pending` delivers ``then(received)`` where ``received`` holds ``recv_rows[p]`` rows from each p in
        group order. The own parts must be empty (a process keeps what it holds). Counted: the bytes received.
        """
        me = self.grid.index(axis)
        if send_rows[me] or recv_rows[me]:
            raise ValueError("all_to_all_async: a process does not send rows to itself")
        if self.encoded(send) and self.grid.size(axis) > 1:
            like = send
            data = self._encode(send)
            back = (lambda received: then(self._decode(received, like))) if then is not None else (
                lambda received: self._decode(received, like))
            return self.all_to_all_async(data, send_rows, recv_rows, axis, back)
        row_shape = tuple(send.shape[1:])
        received = send.new_empty((sum(recv_rows),) + row_shape)
        nbytes = _nbytes(received)
        return self._issue("all_to_all", axis, nbytes, received,
                           lambda g: dist.all_to_all_single(received, send.contiguous(), list(recv_rows),
                                                            list(send_rows), group=g, async_op=True), then)

    def all_to_all(self, send: torch.Tensor, send_rows: list[int], recv_rows: list[int], axis: str) -> torch.Tensor:
        """Blocking `all_to_all_async`; returns the received rows. Collective on ``axis``."""
        return self.all_to_all_async(send, send_rows, recv_rows, axis).wait()

    @contextmanager
    def float32_values(self, keep: bool = True) -> Iterator[None]:
        """With ``keep``, the collectives issued inside the block move float32 payloads as float32 whatever the
        wire precision (the row statistics of a norm: `gridgnn.cost.column_steps.ColumnStep.float32`)."""
        previous, self._float32 = self._float32, self._float32 or keep
        try:
            yield
        finally:
            self._float32 = previous

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Tag the collectives issued inside the block with ``name`` (one of `PHASES`)."""
        if name not in PHASES:
            raise ValueError(f"unknown phase '{name}'")
        previous, self._phase = self._phase, name
        try:
            yield
        finally:
            self._phase = previous

    def totals(self) -> CommTotals:
        return CommTotals.of(self.records)

    def reset(self) -> list[CommRecord]:
        """Return the records so far and start a new list."""
        records, self.records = self.records, []
        return records

    def _run(self, op: str, axis: str, nbytes: int, call) -> None:
        p = self.grid.size(axis)
        if p == 1:
            return
        start = time.perf_counter()
        try:
            call(self.grid.group(axis))
        except RuntimeError as error:  # gloo and NCCL report a lost or silent peer as RuntimeError
            raise self.lost_peer(op, axis, error) from error
        if self.grid.device.type == "cuda":
            torch.cuda.synchronize(self.grid.device)
        self.records.append(CommRecord(op, axis, p, nbytes, time.perf_counter() - start, self._phase))

    def broadcast(self, tensor: torch.Tensor, axis: str, root: int) -> torch.Tensor:
        """Collective on ``axis``: ``tensor`` of the process at coordinate ``root`` overwrites the others'."""
        if self.encoded(tensor) and self.grid.size(axis) > 1:
            return self._blocking(self._broadcast_encoded(tensor, axis, root, None, round_root=True))
        nbytes = 0 if self.grid.index(axis) == root else _nbytes(tensor)
        self._run("broadcast", axis, nbytes,
                  lambda g: dist.broadcast(tensor, group=g, group_src=root))
        return tensor

    def reduce(self, tensor: torch.Tensor, axis: str, root: int) -> torch.Tensor:
        """Collective on ``axis``: the sum over the group lands in the root's ``tensor``.

        Non-root buffers are clobbered (gloo uses them as scratch): do not read them afterwards.
        """
        if self.encoded(tensor) and self.grid.size(axis) > 1:
            return self._blocking(self._reduce_encoded(tensor, axis, root))
        nbytes = 0 if self.grid.index(axis) == root else _nbytes(tensor)
        self._run("reduce", axis, nbytes, lambda g: dist.reduce(tensor, group=g, group_dst=root))
        return tensor

    def all_reduce(self, tensor: torch.Tensor, axis: str, op: str = "sum") -> torch.Tensor:
        """Collective on ``axis``: every process's ``tensor`` becomes the sum (``op="max"``: the element-wise
        maximum) over the group."""
        p = self.grid.size(axis)
        reduce_op = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}[op]
        if op == "sum" and p > 1 and self.encoded(tensor):
            chunks = block_sizes(block_bounds(tensor.shape[0], p, allow_empty=True, what="rows"))
            mine = self.reduce_scatter_rows(tensor, axis, chunks)
            tensor.copy_(self.all_gather_rows(mine, axis, chunks))
            return tensor
        self._run("all_reduce", axis, 2 * _nbytes(tensor) * (p - 1) // p,
                  lambda g: dist.all_reduce(tensor, op=reduce_op, group=g))
        return tensor

    def all_gather_rows(self, local: torch.Tensor, axis: str, row_counts: list[int]) -> torch.Tensor:
        """Collective on ``axis``: concatenate the groups's row blocks (process k holds ``row_counts[k]``).

        Returns a tensor of ``sum(row_counts)`` rows on every process; parts are padded to the largest.
        """
        p = self.grid.size(axis)
        if p == 1:
            return local
        chunk = max(row_counts)
        if self.encoded(local):
            return self._all_gather_encoded(local, axis, row_counts)
        padded = _pad_rows(local, chunk)
        out = local.new_empty((p * chunk,) + tuple(local.shape[1:]))
        self._run("all_gather", axis, (p - 1) * _nbytes(padded),
                  lambda g: _all_gather_single(out, padded, group=g))
        parts = [out[k * chunk: k * chunk + rows] for k, rows in enumerate(row_counts)]
        return torch.cat(parts)

    def reduce_scatter_rows(self, full: torch.Tensor, axis: str, row_counts: list[int]) -> torch.Tensor:
        """Collective on ``axis``: sum ``full`` over the group; process k keeps rows of part k.

        ``full`` has ``sum(row_counts)`` rows; parts are padded to the largest before the collective.
        """
        p = self.grid.size(axis)
        if p == 1:
            return full
        if self.encoded(full):
            return self._reduce_scatter_encoded(full, axis, row_counts)
        chunk = max(row_counts)
        blocks = torch.split(full, row_counts)
        stacked = torch.cat([_pad_rows(b, chunk) for b in blocks])
        out = full.new_empty((chunk,) + tuple(full.shape[1:]))
        self._run("reduce_scatter", axis, (p - 1) * _nbytes(out),
                  lambda g: _reduce_scatter_single(out, stacked, group=g))
        return out[: row_counts[self.grid.index(axis)]]

    def all_gather_cols(self, x: torch.Tensor, axis: str, col_counts: list[int]) -> torch.Tensor:
        """Collective on ``axis``: (m, f_k) column blocks -> (m, Σ f) on every process (process k holds
        ``col_counts[k]`` columns). Carried transposed as `all_gather_rows` of the (f_k, m) blocks; in the wire
        precision each vertex row is encoded with its own scale and the encoded (bytes, m) blocks travel, padded
        to the largest, so a column never shares one int8 scale across every vertex."""
        if self.grid.size(axis) == 1:
            return x
        if not self.encoded(x):
            return self.all_gather_rows(x.t().contiguous(), axis, col_counts).t().contiguous()
        p, rows = self.grid.size(axis), x.shape[0]
        widths = [wire_row_bytes(self.precision, f) for f in col_counts]
        chunk = max(widths)
        padded = _pad_rows(self._encode(x).t().contiguous(), chunk)  # (chunk, m) bytes
        out = padded.new_empty((p * chunk, rows))
        self._run("all_gather", axis, (p - 1) * _nbytes(padded), lambda g: _all_gather_single(out, padded, group=g))
        parts = [decode(out[k * chunk: k * chunk + widths[k]].t().contiguous(), self.precision, f)
                 for k, f in enumerate(col_counts)]
        return torch.cat(parts, dim=1)

    def reduce_scatter_cols(self, x: torch.Tensor, axis: str, col_counts: list[int]) -> torch.Tensor:
        """Collective on ``axis``: partial sums (m, Σ f) on every process -> this process's columns (m, f_k) of
        their sum. Carried transposed as `reduce_scatter_rows`; in the wire precision as an all-to-all of each
        column block encoded per vertex row (transposed bytes), summed in float32 by the block's owner."""
        if self.grid.size(axis) == 1:
            return x
        if not self.encoded(x):
            return self.reduce_scatter_rows(x.t().contiguous(), axis, col_counts).t().contiguous()
        p, me = self.grid.size(axis), self.grid.index(axis)
        widths = [wire_row_bytes(self.precision, f) for f in col_counts]
        blocks = torch.split(x, col_counts, dim=1)
        send = torch.cat([self._encode(block.contiguous()).t() for k, block in enumerate(blocks) if k != me])
        send_rows = [0 if k == me else widths[k] for k in range(p)]
        recv_rows = [0 if k == me else widths[me] for k in range(p)]
        received = self.all_to_all(send.contiguous(), send_rows, recv_rows, axis)
        total = blocks[me].clone()
        for part in torch.split(received, [widths[me]] * (p - 1)):
            total += decode(part.t().contiguous(), self.precision, col_counts[me])
        return total

    def _all_gather_encoded(self, local: torch.Tensor, axis: str, row_counts: list[int]) -> torch.Tensor:
        """`all_gather_rows` in the wire precision: encoded parts, padded to the largest; every part is decoded,
        the own one included, so every process holds the same rows."""
        p, chunk = self.grid.size(axis), max(row_counts)
        padded = _pad_rows(self._encode(local), chunk)
        out = padded.new_empty((p * chunk, padded.shape[1]))
        self._run("all_gather", axis, (p - 1) * _nbytes(padded),
                  lambda g: _all_gather_single(out, padded, group=g))
        parts = [self._decode(out[k * chunk: k * chunk + rows], local) for k, rows in enumerate(row_counts)]
        return torch.cat(parts)

    def _reduce_scatter_encoded(self, full: torch.Tensor, axis: str, row_counts: list[int]) -> torch.Tensor:
        """`reduce_scatter_rows` in the wire precision: part k of every process goes to process k encoded
        (an all-to-all, unpadded), which adds the decoded parts to its own part in float32, in group order."""
        p, me = self.grid.size(axis), self.grid.index(axis)
        send_rows = [0 if k == me else rows for k, rows in enumerate(row_counts)]
        recv_rows = [0 if k == me else row_counts[me] for k in range(p)]
        others = torch.cat([block for k, block in enumerate(torch.split(full, row_counts)) if k != me])
        received = self.all_to_all(others, send_rows, recv_rows, axis)
        start = sum(row_counts[:me])
        total = full[start:start + row_counts[me]].clone()
        for part in torch.split(received, [r for r in recv_rows if r]):
            total.add_(part)
        return total

    @staticmethod
    def _blocking(pending: Pending) -> torch.Tensor:
        """Wait for ``pending`` at once (a blocking collective issued through the asynchronous path)."""
        return pending.wait()


def _row_width(tensor: torch.Tensor) -> int:
    """Values per row (the first dimension's) of ``tensor``."""
    return math.prod(tensor.shape[1:])


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _pad_rows(tensor: torch.Tensor, rows: int) -> torch.Tensor:
    if tensor.shape[0] == rows:
        return tensor.contiguous()
    pad = tensor.new_zeros((rows - tensor.shape[0],) + tuple(tensor.shape[1:]))
    return torch.cat([tensor, pad])
