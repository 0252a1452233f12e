"""Model files others can load: the weights and the model's configuration, and their mapping onto PyG.

A model file (``gridgnn train --save-model FILE``, `save_model`) is one ``torch.save`` of a dict of plain
types and tensors, so ``torch.load(FILE, weights_only=True)`` reads it without running code::

    format     "gridgnn-model/1"
    model      the model kind: "gcn", "sage", "gin" or "gat" (the keys of `MODEL_KINDS`, as ``--model``)
    config     the constructor arguments of that kind: in_channels, hidden_channels, out_channels, num_layers,
               order (per-layer orders follow from it), dropout, seed; and "gcn": bias; "sage": normalize;
               "gin": eps (the initial ε), train_eps; "gat": heads, output_heads, attn_dropout
               (hidden_channels is then the width of one head)
    state      the ``state_dict``: "gcn": ``layers.{k}.weight`` (in, out), ``layers.{k}.bias`` (out,);
               "sage": ``layers.{k}.weight_neigh``, ``weight_root`` (in, out), ``bias`` (out,);
               "gin": ``layers.{k}.weight1`` (in, out), ``bias1``, ``weight2`` (out, out), ``bias2``, ``eps`` (1,);
               "gat": ``layers.{k}.weight`` (in, K·C), ``att_src``, ``att_dst`` (K, C), ``bias`` (K·C, or C
               on the output layer)
    info       where the weights come from: epoch, weights ("best" or "last"), dataset name and sizes

Mapping onto PyTorch Geometric (`to_pyg`): layer k of a "gcn" model is ``GCNConv(in, out)`` with
``lin.weight = W_kᵀ`` and ``bias = b_k``; ReLU between layers, log-softmax after the last; the graph goes in as
``edge_index = [src, dst]`` of the adjacency (``adj[dst, src] != 0``, `gridgnn.data.interop.graph_to_pyg`).
GCNConv's normalization D^-1/2 (A + I) D^-1/2 with in-degrees is gridgnn's Â, so PyG reproduces the
log-probabilities within 1e-5. A "sage" layer is ``SAGEConv(in, out, aggr="mean", root_weight=True,
normalize=...)`` with ``lin_l.weight = W_neighᵀ``, ``lin_l.bias = b``, ``lin_r.weight = W_rootᵀ``; a "gin" layer
is ``GINConv(Sequential(Linear(in, out), ReLU(), Linear(out, out)), eps, train_eps)``; a "gat" layer is
``GATConv(in, C, heads=K, concat=...)`` with ``lin.weight = Wᵀ``, ``att_src``/``att_dst`` of shape (1, K, C),
``bias = b``. A new model kind adds one entry to `MODEL_KINDS`.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from gridgnn.errors import ConfigError, GridGNNError
from gridgnn.limits import zip_inflation_problem
from gridgnn.nn.gat import GAT
from gridgnn.nn.gcn import GCN
from gridgnn.nn.gin import GIN
from gridgnn.nn.model_config import check_model_config, check_state_covers
from gridgnn.nn.sage import SAGE
from gridgnn.nn.stack import OUTPUTS, LayerStack
from gridgnn.safe_files import atomic_write

FORMAT = "gridgnn-model/1"
MAX_MODEL_BYTES = 4 << 30
"""The largest model file `load_model` reads (a guard against reading a wrong, huge file)."""


class ModelFileError(GridGNNError):
    """A model file is missing, corrupt, foreign, or does not fit the data it is used on."""


@dataclass(frozen=True)
class ModelKind:
    """How to rebuild one kind of model from its ``config`` and to describe and map an instance."""

    build: Callable[[dict], nn.Module]
    config_of: Callable[[nn.Module], dict]
    to_pyg: Callable[[nn.Module], nn.Module]


def _stack_config(model: LayerStack) -> dict:
    """The constructor arguments every `LayerStack` shares."""
    first, last = model.layers[0], model.layers[-1]
    orders = {layer.order for layer in model.layers}
    return {"in_channels": first.in_channels,
            "hidden_channels": first.out_channels if len(model.layers) > 1 else last.out_channels,
            "out_channels": last.out_channels, "num_layers": len(model.layers),
            "order": orders.pop() if len(orders) == 1 else "auto", "dropout": model.dropout, "seed": model.seed,
            "task": model.task, **({"target_shift": model.target_shift, "target_scale": model.target_scale}
                                   if model.target_scale is not None else {})}


def _stack_arguments(config: dict) -> tuple[tuple, dict]:
    """The positional and shared keyword arguments of a `LayerStack` from its ``config``."""
    return ((config["in_channels"], config["hidden_channels"], config["out_channels"]),
            {"num_layers": config["num_layers"], "dropout": config["dropout"], "order": config["order"],
             "seed": config["seed"]})


def _gcn_config(model: GCN) -> dict:
    return {**_stack_config(model), "bias": model.layers[0].bias is not None}


def _gcn_build(config: dict) -> GCN:
    args, kwargs = _stack_arguments(config)
    return GCN(*args, bias=config["bias"], **kwargs)


def _sage_config(model: SAGE) -> dict:
    return {**_stack_config(model), "normalize": bool(model.layers[0].normalize)}


def _sage_build(config: dict) -> SAGE:
    args, kwargs = _stack_arguments(config)
    return SAGE(*args, normalize=bool(config["normalize"]), **kwargs)


def _gin_config(model: GIN) -> dict:
    first = model.layers[0]
    return {**_stack_config(model), "eps": float(first.eps.detach()[0]),
            "train_eps": isinstance(first.eps, nn.Parameter)}


def _gin_build(config: dict) -> GIN:
    args, kwargs = _stack_arguments(config)
    return GIN(*args, eps=float(config["eps"]), train_eps=bool(config["train_eps"]), **kwargs)


def _gat_config(model: GAT) -> dict:
    config = {**_stack_config(model), "heads": model.heads, "output_heads": model.output_heads,
              "attn_dropout": model.attn_dropout}
    if len(model.layers) > 1:
        config["hidden_channels"] = model.hidden_per_head
    return config


def _gat_build(config: dict) -> GAT:
    args, kwargs = _stack_arguments(config)
    return GAT(*args, heads=int(config["heads"]), output_heads=int(config["output_heads"]),
               attn_dropout=float(config["attn_dropout"]), **kwargs)


class PygStack(nn.Module):
    """PyG's convolution layers holding a gridgnn model's weights: ``forward(x, edge_index)`` -> (n, C)
    log-probabilities, or logits / values when ``output`` is ``identity`` (the model's
    `gridgnn.nn.stack.LayerStack.output`); eval mode: no dropout; ReLU between layers as gridgnn's models."""

    def __init__(self, convs: list[nn.Module], output: str = "log_softmax"):
        super().__init__()
        self.convs = nn.ModuleList(convs)
        self.output = output
        self.target_shift = self.target_scale = None  # a standardized regression's units (LayerStack's)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for index, conv in enumerate(self.convs):
            x = conv(x if index == 0 else torch.relu(x), edge_index)
        if self.output == "log_softmax":
            return torch.log_softmax(x, dim=1)
        if self.target_scale is not None:
            x = x * torch.tensor(self.target_scale, dtype=x.dtype) + torch.tensor(self.target_shift, dtype=x.dtype)
        return x


def _gcn_to_pyg(model: GCN) -> PygStack:
    from torch_geometric.nn import GCNConv

    convs = []
    for layer in model.layers:
        conv = GCNConv(layer.in_channels, layer.out_channels, bias=layer.bias is not None)
        with torch.no_grad():
            conv.lin.weight.copy_(layer.weight.detach().T)
            if layer.bias is not None:
                conv.bias.copy_(layer.bias.detach())
        convs.append(conv)
    return PygStack(convs).eval()


def _sage_to_pyg(model: SAGE) -> PygStack:
    from torch_geometric.nn import SAGEConv

    convs = []
    for layer in model.layers:
        conv = SAGEConv(layer.in_channels, layer.out_channels, aggr="mean", root_weight=True,
                        normalize=layer.normalize)
        with torch.no_grad():
            conv.lin_l.weight.copy_(layer.weight_neigh.detach().T)
            conv.lin_l.bias.copy_(layer.bias.detach())
            conv.lin_r.weight.copy_(layer.weight_root.detach().T)
        convs.append(conv)
    return PygStack(convs).eval()


def _gin_to_pyg(model: GIN) -> PygStack:
    from torch_geometric.nn import GINConv

    convs = []
    for layer in model.layers:
        mlp = nn.Sequential(nn.Linear(layer.in_channels, layer.out_channels), nn.ReLU(),
                            nn.Linear(layer.out_channels, layer.out_channels))
        conv = GINConv(mlp, eps=float(layer.eps.detach()[0]), train_eps=isinstance(layer.eps, nn.Parameter))
        with torch.no_grad():
            mlp[0].weight.copy_(layer.weight1.detach().T)
            mlp[0].bias.copy_(layer.bias1.detach())
            mlp[2].weight.copy_(layer.weight2.detach().T)
            mlp[2].bias.copy_(layer.bias2.detach())
        convs.append(conv)
    return PygStack(convs).eval()


def _gat_to_pyg(model: GAT) -> PygStack:
    from torch_geometric.nn import GATConv

    convs = []
    for layer in model.layers:
        conv = GATConv(layer.in_channels, layer.channels, heads=layer.heads, concat=layer.concat)
        with torch.no_grad():
            conv.lin.weight.copy_(layer.weight.detach().T)
            conv.att_src.copy_(layer.att_src.detach()[None])
            conv.att_dst.copy_(layer.att_dst.detach()[None])
            conv.bias.copy_(layer.bias.detach())
        convs.append(conv)
    return PygStack(convs).eval()


MODEL_KINDS: dict[str, ModelKind] = {"gcn": ModelKind(_gcn_build, _gcn_config, _gcn_to_pyg),
                                     "sage": ModelKind(_sage_build, _sage_config, _sage_to_pyg),
                                     "gin": ModelKind(_gin_build, _gin_config, _gin_to_pyg),
                                     "gat": ModelKind(_gat_build, _gat_config, _gat_to_pyg)}
"""Model kinds a model file may hold, by the ``model`` field."""


def kind_of(model: nn.Module) -> str:
    """The `MODEL_KINDS` key of ``model`` (raises `ConfigError` for a model gridgnn cannot save)."""
    for kind, cls in (("gcn", GCN), ("sage", SAGE), ("gin", GIN), ("gat", GAT)):
        if type(model) is cls:
            return kind
    raise ConfigError(f"cannot save a {type(model).__name__}: gridgnn saves {', '.join(MODEL_KINDS)} models")


def model_document(model: nn.Module, info: dict | None = None) -> dict:
    """The dict a model file holds (see the module docstring); tensors are detached CPU copies."""
    kind = kind_of(model)
    state = {key: value.detach().cpu().clone() for key, value in model.state_dict().items()}
    return {"format": FORMAT, "model": kind, "config": MODEL_KINDS[kind].config_of(model), "state": state,
            "info": dict(info or {})}


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
    if kind not in MODEL_KINDS:
        raise ModelFileError(f"{where}: unknown model kind {kind!r} (this gridgnn knows "
                             f"{', '.join(MODEL_KINDS)})")
    try:
        widths = check_model_config(kind, config)
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
        return MODEL_KINDS[kind].build(config).for_task(task, config.get("target_shift"),
                                                         config.get("target_scale"))
    except (KeyError, TypeError, ValueError, GridGNNError) as exc:
        raise ModelFileError(f"{where}: malformed {kind} configuration ({exc})") from None


def to_pyg(model: nn.Module) -> nn.Module:
    """The PyTorch Geometric equivalent of ``model`` (see the module docstring), in eval mode.

    ``to_pyg(model)(x, edge_index)`` gives the output of gridgnn's ``model(x, agg)`` within 1e-5:
    log-probabilities for a multiclass model, logits or values for a multilabel or regression one.
    """
    pyg = MODEL_KINDS[kind_of(model)].to_pyg(model)
    pyg.output, pyg.target_shift, pyg.target_scale = model.output, model.target_shift, model.target_scale
    return pyg


def check_fits(model: nn.Module, num_features: int, where: str) -> None:
    """Raise `ModelFileError` when ``model`` was trained for another feature width than the data's."""
    width = MODEL_KINDS[kind_of(model)].config_of(model)["in_channels"]
    if width != num_features:
        raise ModelFileError(f"{where} takes {width} input features, the dataset has {num_features}; "
                             "predict on a graph with the same feature width")
