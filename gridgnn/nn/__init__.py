"""Layers and models written as single-device math over an injected aggregation (DESIGN.md §4, layer 5)."""

from gridgnn.nn.dropout import dropout, sparse_dropout
from gridgnn.nn.features import SparseFeatures, as_model_input
from gridgnn.nn.gcn import GCN, GCNLayer, resolve_order
from gridgnn.nn.hashing import keep_mask
from gridgnn.nn.loss import masked_accuracy, masked_correct, masked_cross_entropy

__all__ = [
    "GCN",
    "GCNLayer",
    "SparseFeatures",
    "as_model_input",
    "dropout",
    "keep_mask",
    "masked_accuracy",
    "masked_correct",
    "masked_cross_entropy",
    "resolve_order",
    "sparse_dropout",
]
