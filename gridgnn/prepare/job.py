"""What a distributed preparation is asked to do, as every process reads it (a JSON file the launcher writes,
or the command line itself under torchrun). Imports no torch."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gridgnn.errors import ConfigError

KINDS = ("edge-list", "rmat", "csbm", "ogb-binary")
"""Sources a distributed preparation reads in parts: a text edge list or ``.npy`` edge array (byte or row ranges),
the R-MAT generator and the chunked csbm (chunks: `gridgnn.data.csbm_parts`) and an OGB folder in the binary
layout (ranges of its compressed arrays: `gridgnn.prepare.ogb_parts`). Other sources are prepared by one
process."""


@dataclass
class PrepareJob:
    """``source``: the dataset spec as given; ``kind``: one of `KINDS`; ``name`` and ``meta``: the graph's, as
    the one-process loader names it; ``operator``: the model's (`gridgnn.data.operators`); ``shards``: K row
    shards; ``folder``: the (partial) folder the shards are written into; ``source_state``: the edge list's
    [size, mtime_ns, inode] when the preparation started; ``generator``: R-MAT's or csbm's parameters; ``reorder``:
    ``none``, ``random`` or ``double-random`` (`gridgnn.data.bijection.random_bijection` of ``reorder_seed``, its
    statistics over ``reorder_parts`` row blocks, as ``prepare --reorder random --parts K``; ``double-random``
    also records the seed of Â's column order); ``node_files``: the ``features``, ``labels`` and ``split`` files
    read by rows (`gridgnn.prepare.node_data`: a path, or an OGB ``.npz`` member ``{"npz", "member", "as"}``) and the
    ``edge_features`` file (`gridgnn.prepare.edge_rows`), by name; ``layout``: an OGB binary folder's vertex and
    edge counts and data file (`gridgnn.prepare.ogb_parts.ogb_layout`)."""

    source: str
    kind: str
    name: str
    operator: str
    shards: int
    folder: str
    directed: bool = False
    seed: int = 0
    normalize_features: bool | None = None
    source_state: list[int] | None = None
    generator: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    reorder: str = "none"
    reorder_parts: int = 1
    reorder_seed: int = 0
    node_files: dict = field(default_factory=dict)
    layout: dict = field(default_factory=dict)
    launcher_pid: int | None = None
    summary_path: str | None = None
    command: str = "prepare"

    @property
    def token(self) -> str:
        """12 hex digits naming this preparation's shards: a digest of what decides the folder's content (the
        source and its state, the generator, operator, direction, seed, feature normalization, shard count),
        so that every P gives the same names and another input gives others."""
        decides = {k: v for k, v in asdict(self).items() if k not in ("folder", "launcher_pid", "summary_path")
                   and (k != "node_files" or v)}  # the files' digests are in ``meta``
        return hashlib.sha256(json.dumps(decides, sort_keys=True).encode()).hexdigest()[:12]

    def write(self, path: str | os.PathLike) -> Path:
        target = Path(path)
        target.write_text(json.dumps(asdict(self), indent=1) + "\n", encoding="utf-8")
        return target

    @classmethod
    def read(cls, path: str | os.PathLike) -> PrepareJob:
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(**document)
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError(f"cannot read the preparation job '{path}' ({exc})") from None
