"""``--init-from MODEL_FILE``: start training from the weights of a saved model instead of a random
initialization (fine-tuning, or going on with a new optimizer and schedule).

The file is a model file (``--save-model``, `gridgnn.save_model`), read with ``weights_only=True``. It must
hold the model this run trains: the same kind (``--model``), layer count, hidden width (GAT: and heads), and
the input and output widths of this run's dataset; anything else is refused with one line naming the first
difference. Adam's state, the epoch count and the RNG start afresh. With ``--resume`` and a checkpoint to
resume from, the checkpoint wins (the weights it holds already started from the file).
Not collective: every rank reads the file alike.
"""

from __future__ import annotations

import torch
from torch import nn

from gridgnn.config import TrainConfig
from gridgnn.errors import ConfigError


def expected_widths(config: TrainConfig, num_features: int, num_classes: int) -> dict:
    """The structural fields a model file must share with the run (`gridgnn.nn.export` config names)."""
    widths = {"model": config.model, "num_layers": config.layers, "in_channels": num_features,
              "out_channels": num_classes}
    if config.layers > 1:
        widths["hidden_channels"] = config.hidden
    from gridgnn.nn.models import MODELS

    return {**widths, **MODELS[config.model].file_structure(config)}  # GAT: its heads; GIN: its norm


_FLAGS = {"num_layers": "--layers", "hidden_channels": "--hidden",
          "in_channels": "input width (the dataset's features)", "out_channels": "output width (the dataset's classes)",
          "heads": "--heads", "output_heads": "--output-heads", "edge_dim": "--edge-dim", "norm": "--gin-norm"}


def initial_weights(config: TrainConfig, num_features: int, num_classes: int) -> dict[str, torch.Tensor]:
    """The state dict of ``config.init_from`` after checking it fits the run (`ConfigError`, one line naming
    ``--init-from``, the file and the first difference; a missing or unreadable file likewise)."""
    from gridgnn.errors import GridGNNError
    from gridgnn.nn.export import kind_of, load_model

    try:
        model, _ = load_model(config.init_from)
    except GridGNNError as error:
        raise ConfigError(f"--init-from: {error}") from None
    kind = kind_of(model)
    found = {"model": kind, **model.file_config()}
    for name, want in expected_widths(config, num_features, num_classes).items():
        if found.get(name) != want:
            what = (f"a {kind} model; this run trains --model {want}" if name == "model" else
                    f"a {kind} model whose {_FLAGS[name]} is {found.get(name)}; this run's is {want}")
            raise ConfigError(f"--init-from '{config.init_from}' holds {what}: start from a model of the same "
                              "architecture (--model, --layers, --hidden, dataset widths)")
    return {key: value.detach() for key, value in model.state_dict().items()}


def load_initial_weights(model: nn.Module, config: TrainConfig, num_features: int, num_classes: int) -> None:
    """Copy the weights of ``config.init_from`` into ``model`` (on its device); `ConfigError` as
    `initial_weights`, or when the weights still do not fit (e.g. a GIN with a trainable ε against one
    without)."""
    state = initial_weights(config, num_features, num_classes)
    mine = model.state_dict()
    if set(state) != set(mine) or any(state[k].shape != mine[k].shape for k in mine):
        extra = sorted(set(state) ^ set(mine)) or [k for k in mine if state[k].shape != mine[k].shape]
        raise ConfigError(f"--init-from '{config.init_from}': its weights do not fit this run's model (first "
                          f"difference: {extra[0]}); start from a model of the same architecture")
    with torch.no_grad():
        for key, value in mine.items():
            value.copy_(state[key].to(value.device, value.dtype))
