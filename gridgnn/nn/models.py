"""Model kinds by name (``--model``): which class, which aggregation operator, built from a `TrainConfig`."""

from __future__ import annotations

from gridgnn.nn.gcn import GCN
from gridgnn.nn.gin import GIN
from gridgnn.nn.sage import SAGE
from gridgnn.nn.stack import LayerStack

MODELS: dict[str, type[LayerStack]] = {"gcn": GCN, "sage": SAGE, "gin": GIN}
"""``--model`` name -> model class; each class names its ``operator`` (`gridgnn.data.operators`)."""


def operator_of(model: str) -> str:
    """The aggregation operator of the model kind ``model`` (``gcn`` -> ``gcn``, ``sage`` -> ``mean``,
    ``gin`` -> ``sum``)."""
    return MODELS[model].operator


def build_model(config, num_features: int, num_classes: int) -> LayerStack:
    """The model ``config.model`` describes (a `gridgnn.config.TrainConfig` or anything with its fields),
    initialized from ``config.seed``."""
    kind = getattr(config, "model", "gcn")
    common = dict(num_layers=config.layers, dropout=config.dropout, order=config.order, seed=config.seed)
    if kind == "sage":
        return SAGE(num_features, config.hidden, num_classes, normalize=config.sage_normalize, **common)
    if kind == "gin":
        return GIN(num_features, config.hidden, num_classes, eps=config.gin_eps, train_eps=config.gin_train_eps,
                   **common)
    return GCN(num_features, config.hidden, num_classes, **common)
