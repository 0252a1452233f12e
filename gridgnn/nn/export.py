"""Model files others can load: the weights and the model's configuration, and their mapping onto PyG.

A model file (``gridgnn train --save-model FILE``, `save_model`) is one ``torch.save`` of a dict of plain
types and tensors, so ``torch.load(FILE, weights_only=True)`` reads it without running code::

    format     "gridgnn-model/1"
    model      the model kind: "gcn", "sage", "gin", "gat" or "gine" (a kind of `gridgnn.nn.models.MODELS`, as
               ``--model``, whose class has a model-file layout: `file_kinds`)
    config     the constructor arguments of that kind: in_channels, hidden_channels, out_channels, num_layers,
               order (per-layer orders follow from it), dropout, seed; and "gcn": bias; "sage": normalize;
               "gin": eps (the initial ε), train_eps, norm ("none" or "layer"; absent: "none"); "gat": heads,
               output_heads, attn_dropout; "gine": eps, train_eps, norm, edge_dim
               (hidden_channels is then the width of one head); and every kind: task (absent: multiclass) and,
               for a regression with standardized targets, target_shift and target_scale (one float per output)
    state      the ``state_dict``: "gcn": ``layers.{k}.weight`` (in, out), ``layers.{k}.bias`` (out,);
               "sage": ``layers.{k}.weight_neigh``, ``weight_root`` (in, out), ``bias`` (out,);
               "gin": ``layers.{k}.weight1`` (in, out), ``bias1``, (with the norm ``norm_weight``, ``norm_bias``
               (out,),) ``weight2`` (out, out), ``bias2``, ``eps`` (1,);
               "gine": as "gin" and ``layers.{k}.edge_weight`` (edge_dim, in), ``edge_bias`` (in,);
               "gat": ``layers.{k}.weight`` (in, K·C), ``att_src``, ``att_dst`` (K, C), ``bias`` (K·C, or C
               on the output layer)
    info       where the weights come from: epoch, weights ("best" or "last"), dataset name and sizes

Mapping onto PyTorch Geometric (`to_pyg`): layer k of a "gcn" model is ``GCNConv(in, out)`` with
``lin.weight = W_kᵀ`` and ``bias = b_k``; ReLU between layers, log-softmax after the last for a multiclass
model (the outputs themselves for multilabel and regression, a standardized regression's mapped back); the
graph goes in as ``edge_index = [src, dst]`` of the adjacency (``adj[dst, src] != 0``,
`gridgnn.data.interop.graph_to_pyg`).
GCNConv's normalization D^-1/2 (A + I) D^-1/2 with in-degrees is gridgnn's Â, so PyG reproduces the
log-probabilities within 1e-5. A "sage" layer is ``SAGEConv(in, out, aggr="mean", root_weight=True,
normalize=...)`` with ``lin_l.weight = W_neighᵀ``, ``lin_l.bias = b``, ``lin_r.weight = W_rootᵀ``; a "gin" layer
is ``GINConv(Sequential(Linear(in, out), ReLU(), Linear(out, out)), eps, train_eps)`` (with the norm a
``LayerNorm(out)`` after the first ``Linear``); a "gine" layer is
``GINEConv`` of the same MLP with ``edge_dim`` (``lin.weight = W_eᵀ``, ``lin.bias = b_e``; the PyG model then
takes ``(x, edge_index, edge_attr)``); a "gat" layer is
``GATConv(in, C, heads=K, concat=...)`` with ``lin.weight = Wᵀ``, ``att_src``/``att_dst`` of shape (1, K, C),
``bias = b``.

Each kind's part of this lives with its class (`gridgnn.nn.stack.LayerStack`): ``file_fields`` and
``file_config`` (what it writes), ``check_file_config`` and ``from_file_config`` (what it reads back), and
``pyg_convs`` (its PyG layers); this module only frames them. A kind whose class defines none of them trains,
plans and predicts as any other; saving or converting it is refused with one `ConfigError` line when asked.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import zipfile
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from gridgnn.config import TrainConfig
from gridgnn.errors import ConfigError, GridGNNError
from gridgnn.limits import zip_inflation_problem
from gridgnn.nn.model_config import check_model_config, check_state_covers
from gridgnn.nn.models import MODELS
from gridgnn.nn.stack import OUTPUTS
from gridgnn.safe_files import atomic_write

FORMAT = "gridgnn-model/1"
MAX_MODEL_BYTES = 4 << 30
"""The largest model file `load_model` reads (a guard against reading a wrong, huge file)."""


class ModelFileError(GridGNNError):
    """A model file is missing, corrupt, foreign, or does not fit the data it is used on."""


class PygStack(nn.Module):
    """PyG's convolution layers holding a gridgnn model's weights: ``forward(x, edge_index)`` -> (n, C)
    log-probabilities, or logits / values when ``output`` is ``identity`` (the model's
    `gridgnn.nn.stack.LayerStack.output`); eval mode: no dropout; ReLU between layers as gridgnn's models."""

    def __init__(self, convs: list[nn.Module], output: str = "log_softmax", shift: list[float] | None = None,
                 scale: list[float] | None = None):
        super().__init__()
        self.convs = nn.ModuleList(convs)
        self.output = output
        # a standardized regression's units (LayerStack's): buffers, so that they follow the module's device
        self.register_buffer("target_shift", None if shift is None else torch.tensor(shift, dtype=torch.float64))
        self.register_buffer("target_scale", None if scale is None else torch.tensor(scale, dtype=torch.float64))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor | None = None) -> torch.Tensor:
        """``edge_attr`` (E, d): the edges' features, in ``edge_index``'s order, for a kind that reads them."""
        extra = () if edge_attr is None else (edge_attr,)
        for index, conv in enumerate(self.convs):
            x = conv(x if index == 0 else torch.relu(x), edge_index, *extra)
        if self.output == "log_softmax":
            return torch.log_softmax(x, dim=1)
        if self.target_scale is not None:
            x = x * self.target_scale.to(x.dtype) + self.target_shift.to(x.dtype)
        return x


def file_kinds() -> tuple[str, ...]:
    """The model kinds with a model-file layout (`gridgnn.nn.stack.LayerStack.file_fields`), as registered."""
    return tuple(kind for kind, cls in MODELS.items() if cls.file_fields is not None)


def kind_of(model: nn.Module) -> str:
    """The registered kind (`gridgnn.nn.models.MODELS`) of ``model``: its class's ``kind`` when that class is
    the one registered under it (`ConfigError` otherwise: gridgnn cannot name, save or convert it)."""
    kind = getattr(type(model), "kind", None)
    if kind is None or MODELS.get(kind) is not type(model):
        raise ConfigError(f"cannot save a {type(model).__name__}: gridgnn saves {', '.join(file_kinds())} models")
    return kind


def recorded_options(recorded: dict) -> dict:
    """The model-file fields of its kind's own options (the class's ``file_options``) from a run's recorded
    configuration ``recorded`` (a `gridgnn.config.TrainConfig` as a dict, as a checkpoint's manifest holds it;
    a field it lacks, written before that field existed, reads as `TrainConfig`'s default); none for a kind
    this gridgnn does not register (`build_model` then names it). May raise TypeError or ValueError on a
    malformed value."""
    model_class = MODELS.get(recorded.get("model", "gcn"))
    if model_class is None:
        return {}
    return model_class.file_options(SimpleNamespace(**{**dataclasses.asdict(TrainConfig()), **recorded}))


def check_saves(kind: str, flag: str = "--save-model", fix: str | None = None) -> None:
    """Raise `ConfigError` (one line naming ``flag`` and ending with ``fix``, by default: leave ``flag`` out)
    when the model kind ``kind`` has no model-file layout: checked before a run trains, so it fails before the
    work rather than at the end. Not collective."""
    if MODELS[kind].file_fields is None:
        raise ConfigError(f"{flag}: --model {kind} has no model-file layout (gridgnn saves "
                          f"{', '.join(file_kinds())} models); {fix or f'leave {flag} out'}")


def model_document(model: nn.Module, info: dict | None = None) -> dict:
    """The dict a model file holds (see the module docstring); tensors are detached CPU copies."""
    kind = kind_of(model)
    config = model.file_config()  # a kind without a model-file layout refuses here, before any copy
    state = {key: value.detach().cpu().clone() for key, value in model.state_dict().items()}
    return {"format": FORMAT, "model": kind, "config": config, "state": state, "info": dict(info or {})}


def save_model(model: nn.Module, path: str | os.PathLike, info: dict | None = None) -> Path:
    """Write ``model`` to ``path`` atomically (`gridgnn.safe_files.atomic_write`: a hidden partial renamed
    into place; a path that is not a regular file is refused, a failed write is a `ConfigError` naming it).
    Not collective."""
    target = Path(path)
    with atomic_write(target, "model file") as stream:  # a full disk: one line naming the file, no partial
        torch.save(model_document(model, info), stream)
    return target


def load_model(path: str | os.PathLike, *, map_location: str | torch.device = "cpu") -> tuple[nn.Module, dict]:
    """The model of a model file (``--save-model``), in eval mode, and its info (checkpoint folders:
    `gridgnn.train.run.inference.load_trained`).

    Reads with ``weights_only=True`` (nothing in the file runs). Raises `ModelFileError` (one line) when the
    file is missing, corrupt, not a gridgnn model file, or its weights do not fit its configuration.
    """
    source = Path(path)
    document = _read_document(source, map_location)
    model = build_model(document["model"], document["config"], where=f"model file '{source}'",
                        state=document["state"])
    try:
        model.load_state_dict(document["state"], strict=True)
    except (RuntimeError, TypeError, KeyError) as exc:
        first = " ".join(str(exc).split())[:200]
        raise ModelFileError(f"model file '{source}': its weights do not fit its configuration ({first})") from None
    info = document.get("info") if isinstance(document.get("info"), dict) else {}
    return model.eval(), info


def _read_document(source: Path, map_location) -> dict:
    where = f"model file '{source}'"
    if not source.is_file():
        raise ModelFileError(f"{where} does not exist (write one with gridgnn train --save-model FILE)")
    if source.stat().st_size > MAX_MODEL_BYTES:
        raise ModelFileError(f"{where} is larger than {MAX_MODEL_BYTES >> 30} GiB: not a gridgnn model file")
    try:
        if zipfile.is_zipfile(source):  # torch.save's format; its declared sizes checked before inflating
            with zipfile.ZipFile(source) as archive:
                problem = zip_inflation_problem(archive)
            if problem is not None:
                raise ModelFileError(f"{where}: {problem}; not reading it")
        document = torch.load(source, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError, AttributeError,
            zipfile.BadZipFile) as exc:
        raise ModelFileError(f"{where} is not a readable gridgnn model file "
                             f"({' '.join(str(exc).split())[:160]})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ModelFileError(f"{where} is not a gridgnn model file (expected format {FORMAT})")
    if not isinstance(document.get("config"), dict) or not isinstance(document.get("state"), dict):
        raise ModelFileError(f"{where} is malformed (config or state missing)")
    return document


def build_model(kind: object, config: dict, *, where: str = "model", state: dict | None = None) -> nn.Module:
    """A fresh model of ``kind`` from its ``config`` (raises `ModelFileError` for an unknown kind or a bad
    configuration, checked before anything is allocated: `gridgnn.nn.model_config`; with ``state``, also a
    configuration needing more weights than ``state`` holds)."""
    if kind not in file_kinds():
        raise ModelFileError(f"{where}: unknown model kind {kind!r} (this gridgnn reads "
                             f"{', '.join(file_kinds())} model files)")
    model_class = MODELS[kind]
    try:
        widths = check_model_config(model_class, config)
    except ValueError as exc:
        raise ModelFileError(f"{where}: malformed {kind} configuration ({exc})") from None
    if state is not None:
        try:
            check_state_covers(widths, state)
        except ValueError as exc:
            raise ModelFileError(f"{where}: its weights do not fit its configuration ({exc})") from None
    task = config.get("task", "multiclass")  # files written before tasks existed hold classifiers
    if task not in OUTPUTS:
        raise ModelFileError(f"{where}: unknown task {task!r} (this gridgnn knows {', '.join(OUTPUTS)})")
    try:
        return model_class.from_file_config(config).for_task(task, config.get("target_shift"),
                                                              config.get("target_scale"))
    except (KeyError, TypeError, ValueError, GridGNNError) as exc:
        raise ModelFileError(f"{where}: malformed {kind} configuration ({exc})") from None


def to_pyg(model: nn.Module) -> nn.Module:
    """The PyTorch Geometric equivalent of ``model`` (see the module docstring), in eval mode.

    ``to_pyg(model)(x, edge_index)`` gives the output of gridgnn's ``model(x, agg)`` within 1e-5:
    log-probabilities for a multiclass model, logits or values for a multilabel or regression one.
    """
    kind_of(model)
    # a kind without a PyG mapping refuses here (ConfigError)
    pyg = PygStack(model.pyg_convs(), model.output, model.target_shift, model.target_scale).eval()
    return pyg


def check_fits(model: nn.Module, num_features: int, where: str) -> None:
    """Raise `ModelFileError` when ``model`` was trained for another feature width than the data's."""
    width = model.layers[0].in_channels
    if width != num_features:
        raise ModelFileError(f"{where} takes {width} input features, the dataset has {num_features}; "
                             "predict on a graph with the same feature width")
