"""`ProcessGrid`: a validated `GridShape` bound to a torch `DeviceMesh` with named axes."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from gridgnn.errors import ConfigError
from gridgnn.grid.placement import Placement
from gridgnn.grid.shape import GridShape

WORLD = "world"  # pseudo-axis: every process of the grid


class ProcessGrid:
    """This rank's place on the logical process grid.

    Build it once per run with `ProcessGrid.create` after the default process group is up. It offers the
    process group of each axis (the processes that differ from this one only along that axis, ordered by
    their coordinate on it, so "root ``k``" of an axis collective is the process at coordinate ``k``).
    """

    def __init__(self, shape: GridShape, mesh: DeviceMesh | None, rank: int, device: torch.device,
                 placement: Placement | None = None):
        self.shape = shape
        self.mesh = mesh
        self.rank = rank
        self.device = device
        self.placement = placement or Placement.default(shape)
        self.coords = self.placement.coords(rank)

    @classmethod
    def create(cls, shape: GridShape, device: torch.device | str | None = None,
               placement: Placement | None = None) -> ProcessGrid:
        """Collective on the whole world: builds the DeviceMesh (one process group per axis).

        ``placement``: which rank takes which coordinates (`gridgnn.grid.placement`; default row-major)."""
        device = torch.device(device) if device is not None else default_device()
        if not dist.is_initialized():
            if shape.world_size != 1:
                raise ConfigError(f"{shape.algo} grid {shape.label()} needs a process group of "
                                  f"{shape.world_size} processes; none is initialized")
            return cls(shape, None, 0, device)
        world = dist.get_world_size()
        if world != shape.world_size:
            raise ConfigError(
                f"{shape.algo} grid {shape.label()} needs {shape.world_size} processes, got {world}"
            )
        if device.type == "cuda":
            # DeviceMesh otherwise selects GPU LOCAL_RANK itself, which does not exist where several ranks
            # share a GPU (the GPU check's gloo runs); `default_device` already chose one that does
            torch.cuda.set_device(device)
            torch.cuda.init()
        if placement is None or placement.is_default:
            mesh = init_device_mesh(device.type, shape.sizes, mesh_dim_names=shape.axes)
        else:
            mesh = DeviceMesh(device.type, torch.as_tensor(placement.mesh_ranks()), mesh_dim_names=shape.axes)
        return cls(shape, mesh, dist.get_rank(), device, placement)

    @property
    def algo(self) -> str:
        return self.shape.algo

    def size(self, axis: str) -> int:
        """Processes in this process's ``axis`` group; the pseudo-axis ``world`` is the whole grid."""
        return self.shape.world_size if axis == WORLD else self.shape.size(axis)

    def index(self, axis: str) -> int:
        """This process's coordinate along ``axis`` (its rank for ``world``)."""
        return self.rank if axis == WORLD else self.coords[axis]

    def group(self, axis: str) -> dist.ProcessGroup:
        """The process group of ``axis`` that contains this process."""
        if self.mesh is None:
            raise RuntimeError("no process group on a single-process grid")
        return dist.group.WORLD if axis == WORLD else self.mesh.get_group(axis)


def default_device() -> torch.device:
    """The device this process computes on: its CUDA device under torchrun when CUDA is present."""
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        return torch.device("cuda", local % torch.cuda.device_count())
    return torch.device("cpu")


def backend_for(device: torch.device | str) -> str:
    """The collective backend for a device type: NCCL for CUDA, gloo otherwise."""
    return "nccl" if torch.device(device).type == "cuda" else "gloo"
