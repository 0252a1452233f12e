"""Seeded train/validation/test splits, returned as three bool masks of shape (n,)."""

from __future__ import annotations

import numpy as np

from gridgnn.errors import DataError

Masks = tuple[np.ndarray, np.ndarray, np.ndarray]


def index_mask(num_nodes: int, index: np.ndarray) -> np.ndarray:
    """Bool mask of shape (num_nodes,) that is True at the given node ids."""
    mask = np.zeros(num_nodes, dtype=bool)
    mask[np.asarray(index, dtype=np.int64)] = True
    return mask


def random_split(num_nodes: int, fractions: tuple[float, float] = (0.6, 0.2), seed: int = 0,
                 among: np.ndarray | None = None) -> Masks:
    """Uniformly random split: ``fractions`` = (train, val) shares, the rest is test (default 60/20/20).
    ``among``: bool (num_nodes,), the vertices to split (the labelled ones); None: all.

    Returns (train_mask, val_mask, test_mask), each bool of shape (num_nodes,), disjoint and covering
    ``among``. With ``among`` None or all true the split is the same as before ``among`` existed.
    """
    train_share, val_share = fractions
    if train_share < 0 or val_share < 0 or train_share + val_share > 1:
        raise DataError(f"split fractions {fractions} must be non-negative and sum to at most 1")
    order = np.random.default_rng(seed).permutation(num_nodes)
    if among is not None and not np.all(among):
        order = order[np.asarray(among, dtype=bool)[order]]
    count = order.shape[0]
    num_train = int(round(train_share * count))
    num_val = min(int(round(val_share * count)), count - num_train)
    return (
        index_mask(num_nodes, order[:num_train]),
        index_mask(num_nodes, order[num_train : num_train + num_val]),
        index_mask(num_nodes, order[num_train + num_val :]),
    )


def per_class_split(labels: np.ndarray, train_per_class: int = 20, val_per_class: int = 30, seed: int = 0) -> Masks:
    """Shchur et al.'s split: `train_per_class` random nodes of each class for training, the next
    `val_per_class` of each class for validation, every other node for test.

    A class with fewer nodes gives what it has (train first). `labels`: int array of shape (n,), -1 for an
    unlabelled node. Returns three disjoint bool masks of shape (n,) covering every labelled node.
    """
    labels = np.asarray(labels)
    num_nodes = labels.shape[0]
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(num_nodes)
    grouped = shuffled[np.argsort(labels[shuffled], kind="stable")]  # class by class, random within a class
    sorted_labels = labels[grouped]
    class_start = np.searchsorted(sorted_labels, sorted_labels, side="left")
    rank = np.arange(num_nodes) - class_start  # position of each node inside its class
    labelled = labels >= 0
    train = index_mask(num_nodes, grouped[rank < train_per_class]) & labelled
    val = index_mask(num_nodes, grouped[(rank >= train_per_class) & (rank < train_per_class + val_per_class)])
    val &= labelled
    return train, val, ~(train | val) & labelled
