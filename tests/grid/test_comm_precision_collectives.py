"""Each counted collective in a wire precision (`gridgnn.grid.comm`, ``--comm-precision``), on 3 processes
with uneven parts: the values every process ends with (sums formed in float32 from the decoded parts, the own
part exact where it never travels), the bytes and calls recorded (the convention table), and fp32 never going
near the codec."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gridgnn.grid.comm as comm_module
from gridgnn.cost.spmm_cost import wire_row_bytes
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.grid.shape import resolve_grid
from gridgnn.grid.wire import round_trip
from gridgnn.launch.spawn import run_workers
from gridgnn.partition import block_bounds, block_sizes

P, WIDTH = 3, 5
ROWS = [4, 2, 3]  # uneven parts
COLS = [2, 3, 1]  # uneven column blocks of a (6 x 6) matrix


def _part(rank: int, rows: int, salt: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(100 * rank + salt)
    return torch.randn(rows, WIDTH, generator=gen) * (rank + 1)


def _wide(rank: int, salt: int) -> torch.Tensor:
    """(6, 6) values whose rows span six orders of magnitude (1e-3 to 1e3)."""
    gen = torch.Generator().manual_seed(100 * rank + salt)
    return torch.randn(6, sum(COLS), generator=gen) * torch.logspace(-3, 3, 6)[:, None]


def _worker(rank: int, world_size: int, precision: str) -> dict:
    grid = ProcessGrid.create(resolve_grid("1d", world_size), "cpu")
    comm = Communicator(grid, precision=precision, seed=7)
    if precision == "fp32":
        def refuse(*args, **kwargs):
            raise AssertionError("fp32 encoded a payload")
        comm_module.encode = comm_module.decode = refuse
    out = {}
    with comm.phase("spmm_forward"):
        x = _part(rank, 6)
        out["broadcast"] = comm.broadcast(x.clone(), "row", root=1).numpy()
        out["reduce"] = comm.reduce(x.clone(), "row", root=2).numpy()
        out["all_reduce"] = comm.all_reduce(x.clone(), "row").numpy()
        out["max"] = comm.all_reduce(x.clone(), "row", op="max").numpy()
        out["all_gather"] = comm.all_gather_rows(_part(rank, ROWS[rank], 1), "row", ROWS).numpy()
        out["reduce_scatter"] = comm.reduce_scatter_rows(_part(rank, sum(ROWS), 2), "row", ROWS).numpy()
        send_rows = [0 if k == rank else k + 1 for k in range(P)]
        recv_rows = [0 if k == rank else rank + 1 for k in range(P)]
        out["all_to_all"] = comm.all_to_all(_part(rank, sum(send_rows), 3), send_rows, recv_rows, "row").numpy()
    forward = comm.reset()
    with comm.phase("dense"):  # 2D's column collectives: column blocks of rows spanning six orders of magnitude
        out["all_gather_cols"] = comm.all_gather_cols(_wide(rank, 4)[:, :COLS[rank]].contiguous(), "row",
                                                      COLS).numpy()
        out["reduce_scatter_cols"] = comm.reduce_scatter_cols(_wide(rank, 5), "row", COLS).numpy()
    columns = comm.reset()
    with comm.phase("weight_grad"):
        out["weight_grad"] = comm.all_reduce(x.clone(), "row").numpy()
    out["records"] = [(r.op, r.bytes, r.phase) for r in forward + comm.reset()]
    out["column_records"] = [(r.op, r.bytes) for r in columns]
    with comm.phase("dense"):  # a norm's row statistics: float32 inside the block, the wire precision after it
        with comm.float32_values():
            out["kept"] = comm.all_reduce(x.clone(), "row").numpy()
        out["after"] = comm.all_reduce(x.clone(), "row").numpy()
    out["kept_records"] = [r.op for r in comm.reset()]
    return out


def _in_order(own: torch.Tensor, others: list[torch.Tensor]) -> torch.Tensor:
    """``own`` plus each of ``others`` in turn, in float32 (the order the receiver adds them)."""
    total = own.clone()
    for part in others:
        total += part
    return total


@pytest.fixture(scope="module")
def results():
    return {precision: run_workers(_worker, P, precision, timeout_s=120) for precision in ("fp32", "bf16", "int8")}


def test_fp32_is_the_plain_collectives(results):
    out = results["fp32"]
    for rank in range(P):
        assert out[rank]["records"] == [
            ("broadcast", 0 if rank == 1 else 6 * WIDTH * 4, "spmm_forward"),
            ("reduce", 0 if rank == 2 else 6 * WIDTH * 4, "spmm_forward"),
            ("all_reduce", 2 * 6 * WIDTH * 4 * 2 // 3, "spmm_forward"),
            ("all_reduce", 2 * 6 * WIDTH * 4 * 2 // 3, "spmm_forward"),
            ("all_gather", 2 * 4 * WIDTH * 4, "spmm_forward"),
            ("reduce_scatter", 2 * 4 * WIDTH * 4, "spmm_forward"),
            ("all_to_all", 2 * (rank + 1) * WIDTH * 4, "spmm_forward"),
            ("all_reduce", 2 * 6 * WIDTH * 4 * 2 // 3, "weight_grad")]
        np.testing.assert_allclose(out[rank]["all_reduce"], sum(_part(k, 6).numpy() for k in range(P)), rtol=1e-6)


def test_bf16_sums_decoded_parts_in_float32_and_counts_encoded_bytes(results):
    out, row = results["bf16"], wire_row_bytes("bf16", WIDTH)
    parts = [_part(k, 6) for k in range(P)]
    sent = [round_trip(p, "bf16") for p in parts]
    for rank in range(P):
        mine = out[rank]
        # a blocking broadcast leaves every process, the root included, the decoded rows
        np.testing.assert_array_equal(mine["broadcast"], sent[1].numpy())
        if rank == 2:  # the root adds the others' decoded parts to its exact own, in group order
            np.testing.assert_array_equal(mine["reduce"], _in_order(parts[2], [sent[0], sent[1]]).numpy())
        chunks = block_sizes(block_bounds(6, P))
        # all-reduce: each chunk summed by its owner from exact own + decoded others, then gathered encoded
        cut = [slice(sum(chunks[:k]), sum(chunks[:k + 1])) for k in range(P)]
        expected = torch.cat([round_trip(_in_order(parts[k][cut[k]], [sent[o][cut[k]] for o in range(P) if o != k]),
                                         "bf16") for k in range(P)])
        np.testing.assert_array_equal(mine["all_reduce"], expected.numpy())
        assert np.array_equal(mine["all_reduce"], out[0]["all_reduce"])  # identical everywhere
        np.testing.assert_array_equal(mine["max"], torch.stack(parts).amax(dim=0).numpy())  # maxima: float32
        gathered = torch.cat([round_trip(_part(k, ROWS[k], 1), "bf16") for k in range(P)])
        np.testing.assert_array_equal(mine["all_gather"], gathered.numpy())
        full = [_part(k, sum(ROWS), 2) for k in range(P)]
        lo, hi = sum(ROWS[:rank]), sum(ROWS[:rank + 1])
        own = _in_order(full[rank][lo:hi], [round_trip(full[o][lo:hi], "bf16") for o in range(P) if o != rank])
        np.testing.assert_array_equal(mine["reduce_scatter"], own.numpy())
        np.testing.assert_allclose(mine["weight_grad"], sum(p.numpy() for p in parts), rtol=1e-6)  # float32
        assert mine["records"] == [
            ("broadcast", 0 if rank == 1 else 6 * row, "spmm_forward"),
            ("reduce", 0 if rank == 2 else 6 * row, "spmm_forward"),
            ("all_to_all", (P - 1) * chunks[rank] * row, "spmm_forward"),
            ("all_gather", (P - 1) * max(chunks) * row, "spmm_forward"),
            ("all_reduce", 2 * 6 * WIDTH * 4 * 2 // 3, "spmm_forward"),
            ("all_gather", (P - 1) * max(ROWS) * row, "spmm_forward"),
            ("all_to_all", (P - 1) * ROWS[rank] * row, "spmm_forward"),
            ("all_to_all", 2 * (rank + 1) * row, "spmm_forward"),
            ("all_reduce", 2 * 6 * WIDTH * 4 * 2 // 3, "weight_grad")]


def test_float32_values_keeps_a_collective_exact_in_every_precision(results):
    exact = sum(_part(k, 6).numpy() for k in range(P))
    for precision, out in results.items():
        for rank in range(P):
            np.testing.assert_allclose(out[rank]["kept"], exact, rtol=1e-6, err_msg=precision)
            encoded = precision != "fp32"
            assert out[rank]["kept_records"] == (["all_reduce", "all_to_all", "all_gather"] if encoded
                                                 else ["all_reduce", "all_reduce"]), precision
            if encoded:  # the same sum, after the block, travels rounded again
                assert not np.allclose(out[rank]["after"], exact, rtol=1e-6, atol=0), precision


def test_column_blocks_are_encoded_per_vertex_row(results):
    """2D's column collectives (`Communicator.all_gather_cols`, `reduce_scatter_cols`): a vertex row keeps its
    own scale, so a row a million times smaller than another is not rounded to zero by the column's largest
    value; bytes: each vertex row of a block encoded, the all-gather padded to the largest block."""
    starts = np.cumsum([0, *COLS])
    gathered = np.concatenate([_wide(k, 4)[:, :COLS[k]].numpy() for k in range(P)], axis=1)
    total = sum(_wide(k, 5).numpy() for k in range(P))
    for precision in ("bf16", "int8"):
        row = [wire_row_bytes(precision, c) for c in COLS]
        for rank in range(P):
            mine = results[precision][rank]
            step = 2 / 127 * np.abs(gathered).max(axis=1, keepdims=True)
            assert np.all(np.abs(mine["all_gather_cols"] - gathered) <= step), precision
            assert np.array_equal(mine["all_gather_cols"], results[precision][0]["all_gather_cols"])
            block = slice(starts[rank], starts[rank + 1])
            parts = sum(np.abs(_wide(k, 5).numpy()[:, block]).max(axis=1, keepdims=True) for k in range(P))
            assert np.all(np.abs(mine["reduce_scatter_cols"] - total[:, block]) <= 2 / 127 * parts), precision
            assert mine["column_records"] == [("all_gather", (P - 1) * max(row) * 6),
                                              ("all_to_all", (P - 1) * row[rank] * 6)]
    fp32 = results["fp32"][1]
    np.testing.assert_array_equal(fp32["all_gather_cols"], gathered)
    np.testing.assert_allclose(fp32["reduce_scatter_cols"], total[:, starts[1]:starts[2]], rtol=1e-5, atol=1e-6)
    assert fp32["column_records"] == [("all_gather", (P - 1) * max(COLS) * 6 * 4),
                                      ("reduce_scatter", (P - 1) * max(COLS) * 6 * 4)]


def test_int8_stays_within_one_step_of_each_rows_scale(results):
    out = results["int8"]
    parts = [_part(k, 6) for k in range(P)]
    total = sum(parts)
    step = 2 / 127 * sum(p.abs().amax(dim=1, keepdim=True) for p in parts)  # one step per travelled part
    for rank in range(P):
        assert np.all(np.abs(out[rank]["all_reduce"] - total.numpy()) <= 2 * step.numpy())
        assert np.array_equal(out[rank]["all_reduce"], out[0]["all_reduce"])
        assert out[rank]["records"][0] == ("broadcast", 0 if rank == 1 else 6 * (WIDTH + 1), "spmm_forward")
    np.testing.assert_allclose(out[2]["reduce"], total.numpy(), atol=float(step.max()))
