"""PyG ``Data`` with unlabelled vertices (-1 / NaN targets) and masks over the labelled ones, float (regression)
and (n, T) 0/1 (multilabel) targets, through `gridgnn.as_graph` and `gridgnn.fit` (issue 33, item 3)."""

from __future__ import annotations

import numpy as np
import pytest

import gridgnn

torch = pytest.importorskip("torch")
pyg_data = pytest.importorskip("torch_geometric.data")

NODES = 400


def _data(y, masks: bool = True):
    """A ring with chords, 5 features, targets ``y``; masks over the labelled vertices (every 3rd one to val,
    test) when ``masks``."""
    rng = np.random.default_rng(1)
    ring = np.stack([np.arange(NODES), (np.arange(NODES) + 1) % NODES])
    edge_index = torch.from_numpy(np.concatenate([ring, rng.integers(0, NODES, (2, 800))], axis=1))
    x = torch.from_numpy(rng.standard_normal((NODES, 5)).astype(np.float32))
    data = pyg_data.Data(x=x, edge_index=edge_index, y=torch.as_tensor(y), num_nodes=NODES)
    if masks:
        present = ~np.isnan(np.asarray(y, dtype=np.float64))
        labelled = np.flatnonzero(present if present.ndim == 1 else present.any(axis=1))
        for k, name in enumerate(("train_mask", "val_mask", "test_mask")):
            mask = np.zeros(NODES, dtype=bool)
            mask[labelled[k::3]] = True
            data[name] = torch.from_numpy(mask)
    return data


def test_two_percent_labelled_classes_with_masks_train():
    y = np.full(NODES, -1, dtype=np.int64)
    chosen = np.random.default_rng(2).choice(NODES, size=8, replace=False)
    y[chosen] = np.arange(8) % 2
    data = _data(np.where(y >= 0, y, np.nan))
    data.y = torch.from_numpy(y)  # -1 for the unlabelled, as PyG datasets write them
    graph = gridgnn.as_graph(data)
    assert graph.task == "multiclass" and graph.num_classes == 2
    assert int(graph.labelled().sum()) == 8
    masks = graph.train_mask | graph.val_mask | graph.test_mask
    np.testing.assert_array_equal(np.flatnonzero(masks), np.sort(chosen))
    result = gridgnn.fit(data, epochs=3)
    assert result.metrics["dataset"]["split"] == {"train": 3, "val": 3, "test": 2}
    assert len(result.history) == 3 and np.isfinite(result.history[-1].loss)


def test_float_targets_are_a_regression_and_nan_is_missing():
    y = np.random.default_rng(3).standard_normal(NODES).astype(np.float32)
    y[::5] = np.nan
    graph = gridgnn.as_graph(_data(y))
    assert graph.task == "regression" and graph.labels.shape == (NODES, 1) and graph.num_classes == 1
    assert int(graph.labelled().sum()) == NODES - NODES // 5
    result = gridgnn.fit(_data(y), epochs=2)
    assert np.isfinite(result.history[-1].loss)


def test_several_zero_one_columns_are_multilabel_without_masks():
    y = (np.random.default_rng(4).random((NODES, 3)) < 0.4).astype(np.float32)
    y[:10] = np.nan  # ten vertices without any target: in no split
    graph = gridgnn.as_graph(_data(y, masks=False))
    assert graph.task == "multilabel" and graph.num_classes == 3
    masks = graph.train_mask | graph.val_mask | graph.test_mask
    assert not masks[:10].any() and masks[10:].all()
    result = gridgnn.fit(_data(y, masks=False), epochs=2)
    assert np.isfinite(result.history[-1].loss)
