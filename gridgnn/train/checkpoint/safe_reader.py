"""Reading DCP's files without running code (not collective).

DCP reads its pickled ``.metadata`` with plain `pickle.load` and its non-tensor entries (optimizer param
groups) with ``torch.load(weights_only=False)``. `VerifiedReader` reads ``.metadata`` with an allow-list
unpickler (`MetadataUnpickler`) and refuses data files outside the checkpoint folder; `WeightsOnlyLoadPlanner`
loads the non-tensor entries with ``torch.load(weights_only=True)``. So a tampered checkpoint cannot run code
(its files are also checked against the manifest first, `gridgnn.train.checkpoint.manifest`).
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner


def _metadata_globals() -> dict[tuple[str, str], object]:
    """The only globals DCP's ``.metadata`` pickle may name: its own metadata classes, torch sizes, dtypes,
    layouts and paths."""
    from torch.distributed.checkpoint import filesystem, metadata

    allowed: dict[tuple[str, str], object] = {
        ("torch", "Size"): torch.Size,
        ("torch.serialization", "_get_layout"): torch.serialization._get_layout,
        ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): filesystem._StorageInfo,
        ("collections", "OrderedDict"): __import__("collections").OrderedDict,
        ("pathlib", "PosixPath"): Path,
        ("pathlib", "Path"): Path,
    }
    for name in ("Metadata", "TensorStorageMetadata", "TensorProperties", "_MEM_FORMAT_ENCODING",
                 "ChunkStorageMetadata", "BytesStorageMetadata", "MetadataIndex", "StorageMeta"):
        if hasattr(metadata, name):
            allowed[("torch.distributed.checkpoint.metadata", name)] = getattr(metadata, name)
    for name in dir(torch):
        if isinstance(getattr(torch, name, None), torch.dtype):
            allowed[("torch", name)] = getattr(torch, name)
    return allowed


class MetadataUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals of `_metadata_globals`; any other is an
    `pickle.UnpicklingError` naming it."""

    def __init__(self, stream: io.BufferedIOBase) -> None:
        super().__init__(stream)
        self._allowed = _metadata_globals()

    def find_class(self, module: str, name: str) -> object:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"forbidden global {module}.{name} in checkpoint metadata") from None


class VerifiedReader(FileSystemReader):
    """DCP's file reader with an allow-list unpickler for ``.metadata`` (DCP uses plain `pickle.load`)."""

    def read_metadata(self, *args: Any, **kwargs: Any):
        from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

        rank = kwargs.get("rank")
        with open(self._get_metadata_path(rank), "rb") as stream:
            metadata = MetadataUnpickler(stream).load()
        if not isinstance(metadata, Metadata):
            raise pickle.UnpicklingError("checkpoint metadata is not DCP metadata")
        for info in (metadata.storage_data or {}).values():  # data files must lie in the checkpoint folder
            relative = str(getattr(info, "relative_path", ""))
            if Path(relative).name != relative or relative in ("", ".", ".."):
                raise pickle.UnpicklingError(f"checkpoint metadata points outside its folder: {relative!r}")
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class WeightsOnlyLoadPlanner(DefaultLoadPlanner):
    """DCP's load planner, but non-tensor entries (optimizer param groups) load with ``weights_only=True``."""

    def load_bytes(self, read_item, value: io.BytesIO) -> None:
        # Same placement as DefaultLoadPlanner.load_bytes, only the unpickling is restricted.
        from torch.distributed.checkpoint._nested_dict import set_element

        obj = torch.load(value, weights_only=True)
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
        else:
            self.state_dict[read_item.dest_index.fqn] = obj
