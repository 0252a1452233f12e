"""`ProcessGrid.create` on CUDA selects the grid's GPU before DeviceMesh does (no process group, no GPU: the
collective calls are stand-ins that record the order of events).

Found on an H100 by the GPU check: DeviceMesh sets GPU ``LOCAL_RANK`` itself when none is selected yet, which
does not exist where four ranks share one GPU (``invalid device ordinal``)."""

from __future__ import annotations

import torch

from gridgnn.grid import process_grid
from gridgnn.grid.shape import resolve_grid


def _stand_ins(monkeypatch, events: list) -> None:
    monkeypatch.setattr(process_grid.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(process_grid.dist, "get_world_size", lambda: 4)
    monkeypatch.setattr(process_grid.dist, "get_rank", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: events.append(("set_device", str(device))))
    monkeypatch.setattr(torch.cuda, "init", lambda: events.append(("init",)))
    monkeypatch.setattr(process_grid, "init_device_mesh",
                        lambda kind, sizes, mesh_dim_names: events.append(("mesh", kind, tuple(sizes))) or "mesh")
    monkeypatch.setattr(process_grid.ProcessGrid, "__init__", lambda self, *args: None)


def test_a_cuda_grid_selects_its_gpu_before_the_device_mesh(monkeypatch):
    events: list = []
    _stand_ins(monkeypatch, events)
    process_grid.ProcessGrid.create(resolve_grid("2d", 4), "cuda:0")
    assert events == [("set_device", "cuda:0"), ("init",), ("mesh", "cuda", (2, 2))]


def test_a_cpu_grid_touches_no_gpu(monkeypatch):
    events: list = []
    _stand_ins(monkeypatch, events)
    process_grid.ProcessGrid.create(resolve_grid("1d", 4), "cpu")
    assert events == [("mesh", "cpu", (4,))]
