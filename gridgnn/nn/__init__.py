"""Layers and models written as single-device math over an injected aggregation (docs/architecture.md §4, layer 5)."""

from gridgnn.nn.dropout import dropout, sparse_dropout
from gridgnn.nn.features import SparseFeatures, as_model_input
from gridgnn.nn.gcn import GCN, GCNLayer, resolve_order
from gridgnn.nn.gin import GIN, GINLayer
from gridgnn.nn.hashing import keep_mask
from gridgnn.nn.layout import Layout, LocalLayout
from gridgnn.nn.loss import masked_accuracy, masked_correct, masked_cross_entropy
from gridgnn.nn.models import MODELS, build_model, operator_of
from gridgnn.nn.sage import SAGE, SAGELayer

__all__ = [
    "GCN",
    "GCNLayer",
    "GIN",
    "GINLayer",
    "Layout",
    "LocalLayout",
    "MODELS",
    "SAGE",
    "SAGELayer",
    "SparseFeatures",
    "as_model_input",
    "build_model",
    "dropout",
    "keep_mask",
    "masked_accuracy",
    "masked_correct",
    "masked_cross_entropy",
    "operator_of",
    "resolve_order",
    "sparse_dropout",
]
