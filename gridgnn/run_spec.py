"""The frozen run spec: one run resolved once, then passed everywhere (layer 1: pure data, no torch).

A `RunSpec` is a `TrainConfig` with everything settled: a concrete algorithm (``--algo auto`` resolved, its
reason in ``config.auto_reason``), a concrete ``comm``, the validated `GridShape` (None for ``local``), how each
process runs (`ProcessOptions`: collective timeout, compute threads, network interface) and, when the local
launcher (``gridgnn train --nprocs P``) resolved it, where the graph it prepared lies and the launcher's pid and
peak memory. Every rule that ties these fields together is checked in `RunSpec.validate` (the rules within
the configuration are `TrainConfig.validate`'s).

Who resolves it (`gridgnn.train.run.resolve.resolve_run`, the one place ``auto`` is settled and `grid_shape_for`
called): the local launcher, once, which writes it as ``run-spec.json`` (`SPEC_FILE`) into its prepared-graph
folder and starts each worker with that file's path as its only argument (`gridgnn.cli.worker`); a torchrun
worker (no gridgnn launcher) resolves the same spec itself from the same graph, deterministically. Nothing
else passes from the launcher to its workers but torchrun's own variables (RANK, WORLD_SIZE, ...). A process
handed a spec uses it as given, whatever its environment: nothing on its path calls `gridgnn.train.run.resolve`
(no "not yet resolved" fallback settles its grid, execution options, vertex order or task again).

The file: ``{"format": "gridgnn-run-spec", "version": 1, "config": {...every TrainConfig field...},
"shape": {"algo", "axes", "sizes"} | null, "process": {"timeout_s", "threads", "interface", "log_every_s"},
"command", "model_file", "predict_split", "prepared_graph", "launcher_pid", "launcher_peak_memory_bytes"}``. Not
collective.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from gridgnn.config import TrainConfig
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import AXES, GridShape

SPEC_FILE = "run-spec.json"
"""The run spec's file name inside the local launcher's prepared-graph folder."""
SPEC_FORMAT, SPEC_VERSION = "gridgnn-run-spec", 1
COMMANDS = ("train", "predict")
"""The commands a launched worker runs from a spec."""
PREDICT_SPLITS = ("train", "val", "test", "all")
"""``gridgnn predict --eval-split``: the split whose metric it reports, or all three."""


@dataclass(frozen=True)
class ProcessOptions:
    """How each process of a run runs: ``timeout_s`` bounds every collective; ``threads``: compute threads
    (None: torch's own on one process, the cores shared among the local workers on a grid); ``interface``:
    the network interface gloo talks on (None: `gridgnn.grid.network.choose_interface` decides);
    ``log_every_s``: when stdout is not a terminal, the fewest seconds between two epoch lines of the log
    (`gridgnn.train.outputs.progress.EpochLog`)."""

    timeout_s: float = 300.0
    threads: int | None = None
    interface: str | None = None
    log_every_s: float = 5.0


@dataclass(frozen=True)
class RunSpec:
    """A run resolved once (see the module docstring). ``command``: ``train`` or ``predict`` (then
    ``model_file`` names the model it infers with); ``prepared_graph``: the folder the local launcher
    prepared or checked for its workers to memory-map (None elsewhere: a worker opens ``config.dataset``,
    prepared or not); ``launcher_pid``: the local launcher's pid (None under torchrun or in one process);
    ``launcher_peak_memory_bytes``: its peak resident memory while preparing the graph."""

    config: TrainConfig
    shape: GridShape | None
    process: ProcessOptions = field(default_factory=ProcessOptions)
    command: str = "train"
    model_file: str | None = None
    predict_split: str | None = None
    """``predict``: the split (``train``, ``val``, ``test`` or ``all``) whose accuracy rank 0 prints and records."""
    prepared_graph: str | None = None
    launcher_pid: int | None = None
    launcher_peak_memory_bytes: int | None = None

    def __post_init__(self) -> None:
        self.validate()

    @property
    def launched_locally(self) -> bool:
        """True in a worker of the local launcher (which checked memory, holds the checkpoint folder's lock
        and prepared or checked the graph on this host)."""
        return self.launcher_pid is not None

    def validate(self) -> None:
        """Raise `ConfigError` (one line) on the first rule the fields break together."""
        config, shape = self.config, self.shape
        if config.algo == "auto":
            raise ConfigError("a run spec holds a resolved configuration: --algo auto must be resolved first")
        unsettled = [name for name in config.free if name != "comm"]  # comm: `resolve_run` settles it last
        if unsettled:
            raise ConfigError(f"a run spec holds a resolved configuration: {', '.join(unsettled)} must be "
                              "settled by the planner first")
        if config.algo == "local" and shape is not None:
            raise ConfigError("a run spec of --algo local has no grid shape")
        if config.algo != "local" and shape is None:
            raise ConfigError(f"a run spec of --algo {config.algo} needs its grid shape")
        if shape is not None:
            _check_shape(config, shape)
        if self.command not in COMMANDS:
            raise ConfigError(f"run spec command must be one of {', '.join(COMMANDS)}; got {self.command!r}")
        if (self.command == "predict") != (self.model_file is not None):
            raise ConfigError("a run spec names a model file exactly when its command is predict")
        if self.predict_split not in (None, *PREDICT_SPLITS) or (self.predict_split and self.command != "predict"):
            raise ConfigError(f"run spec predict_split must be one of {', '.join(PREDICT_SPLITS)} (predict only); "
                              f"got {self.predict_split!r}")
        _check_process(self.process)
        if not self.launched_locally and (self.prepared_graph is not None
                                          or self.launcher_peak_memory_bytes is not None):
            raise ConfigError("a run spec names a prepared folder or launcher memory only with its launcher's pid")
        for name in ("launcher_pid", "launcher_peak_memory_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"run spec {name} must be a non-negative integer, got {value!r}")

    def to_json(self) -> dict:
        """The JSON document of the spec file (see the module docstring)."""
        shape = None if self.shape is None else {"algo": self.shape.algo, "axes": list(self.shape.axes),
                                                 "sizes": list(self.shape.sizes)}
        return {"format": SPEC_FORMAT, "version": SPEC_VERSION, "config": self.config.to_dict(), "shape": shape,
                "process": dataclasses.asdict(self.process), "command": self.command, "model_file": self.model_file,
                "predict_split": self.predict_split,
                "prepared_graph": self.prepared_graph, "launcher_pid": self.launcher_pid,
                "launcher_peak_memory_bytes": self.launcher_peak_memory_bytes}

    @classmethod
    def from_json(cls, document: object) -> RunSpec:
        """The spec a `to_json` document describes, validated; `ConfigError` (one line) on anything else."""
        if not isinstance(document, dict) or document.get("format") != SPEC_FORMAT:
            raise ConfigError(f"not a gridgnn run spec (no \"format\": \"{SPEC_FORMAT}\")")
        if document.get("version") != SPEC_VERSION:
            raise ConfigError(f"run spec version {document.get('version')!r} is not {SPEC_VERSION}: the launcher "
                              "and its workers run different gridgnn versions")
        try:
            shape = document["shape"]
            return cls(config=TrainConfig(**document["config"]),
                       shape=None if shape is None else GridShape(shape["algo"], tuple(shape["axes"]),
                                                                  tuple(shape["sizes"])),
                       process=ProcessOptions(**document["process"]), command=document["command"],
                       model_file=document["model_file"], predict_split=document.get("predict_split"),
                       prepared_graph=document["prepared_graph"],
                       launcher_pid=document["launcher_pid"],
                       launcher_peak_memory_bytes=document["launcher_peak_memory_bytes"])
        except (KeyError, TypeError) as error:
            raise ConfigError(f"run spec is incomplete or malformed: {error}") from None

    def write(self, folder: str | os.PathLike) -> Path:
        """Write the spec as ``folder/run-spec.json``; returns its path."""
        path = Path(folder) / SPEC_FILE
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        return path


def read_spec(path: str | os.PathLike) -> RunSpec:
    """The run spec in the file at ``path`` (`ConfigError`, one line, when it is not one). Imports no torch."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as error:
        raise ConfigError(f"{path}: not a gridgnn run spec ({error})") from None
    return RunSpec.from_json(document)


def _check_shape(config: TrainConfig, shape: GridShape) -> None:
    """The grid shape is one of ``config.algo``'s and agrees with its ``--replication``, ``--grid`` and
    ``--nprocs``."""
    if shape.algo != config.algo or tuple(shape.axes) != AXES.get(shape.algo):
        raise ConfigError(f"run spec grid {shape.algo} {shape.axes} is not a grid of --algo {config.algo}")
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in shape.sizes):
        raise ConfigError(f"run spec grid sizes must be positive integers, got {shape.sizes}")
    if shape.replication != config.replication:
        raise ConfigError(f"run spec grid {shape.label()} does not have --replication {config.replication}")
    if config.grid is not None and config.grid_shape() != shape.sizes:
        raise ConfigError(f"run spec grid {shape.label()} is not --grid {config.grid}")
    if config.nprocs != 1 and math.prod(shape.sizes) != config.nprocs:
        raise ConfigError(f"run spec grid {shape.label()} is not {config.nprocs} processes (--nprocs)")


def _check_process(process: ProcessOptions) -> None:
    timeout = process.timeout_s
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ConfigError(f"run spec timeout_s must be a positive number, got {timeout!r}")
    if process.threads is not None and (isinstance(process.threads, bool) or not isinstance(process.threads, int)
                                        or process.threads < 1):
        raise ConfigError(f"run spec threads must be a positive integer, got {process.threads!r}")
    if process.interface is not None and not isinstance(process.interface, str):
        raise ConfigError(f"run spec interface must be a name, got {process.interface!r}")
    every = process.log_every_s
    if isinstance(every, bool) or not isinstance(every, (int, float)) or not 0 <= every < math.inf:
        raise ConfigError(f"run spec log_every_s must be a non-negative number of seconds, got {every!r}")
