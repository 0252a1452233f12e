"""The single-process GCN: product orders, sparse features, initialization and loss."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from model_helpers import random_graph

from gridgnn.errors import ConfigError
from gridgnn.nn import GCN, GCNLayer, SparseFeatures, as_model_input, masked_accuracy, masked_cross_entropy
from gridgnn.nn.gcn import global_ids, resolve_order
from gridgnn.nn.layout import LocalLayout, as_layout
from gridgnn.sparse.adjacency import gcn_normalize
from gridgnn.spmm.local import LocalSpMM


def test_auto_order_puts_the_narrower_width_through_the_spmm():
    assert resolve_order("auto", 1433, 16) == "transform-first"
    assert resolve_order("auto", 16, 64) == "aggregate-first"
    assert resolve_order("auto", 16, 16) == "aggregate-first"
    assert resolve_order("aggregate-first", 1433, 16) == "aggregate-first"
    model = GCN(100, 16, 7, num_layers=3)
    assert [layer.order for layer in model.layers] == ["transform-first", "aggregate-first", "transform-first"]
    with pytest.raises(ConfigError, match="order must be one of"):
        GCN(100, 16, 7, order="sideways")


def test_the_order_rule_has_one_home_read_by_models_and_cost_model():
    import cost_oracles

    import gridgnn.config
    from gridgnn.cost.epoch_model import ModelSpec
    from gridgnn.nn.trace import model_spec

    assert resolve_order is gridgnn.config.resolve_order
    assert cost_oracles.resolve_order is resolve_order
    assert cost_oracles.spmm_widths([1433, 16, 64, 7], "auto") == ([16, 16, 7], [16, 16, 7])
    # the cost model reads each layer's order from the model's own forward, which asks this rule
    for widths in ([1433, 16, 64, 7], [8, 64, 3], [5, 5, 5]):
        for order in ("auto", "aggregate-first", "transform-first"):
            spec = model_spec(ModelSpec(widths[0], widths[-1], len(widths) - 1, widths[1], order), None)
            if widths[1:-1] != [widths[1]] * (len(widths) - 2):
                continue  # the stack's hidden layers are all one width
            priced = ["aggregate-first" if layer.aggregates_first else "transform-first" for layer in spec.ops.layers]
            pairs = zip(spec.ops.widths[:-1], spec.ops.widths[1:], strict=True)
            expected = [resolve_order(order, a, b) for a, b in pairs]
            assert priced == expected, (widths, order)
            assert [layer.spmm_width for layer in spec.ops.layers] == cost_oracles.spmm_widths(spec.ops.widths,
                                                                                                 order)[0]


def _forward_and_grads(graph, order, *, sparse):
    agg = LocalSpMM(gcn_normalize(graph.adj))
    model = GCN(graph.num_features, 8, graph.num_classes, num_layers=3, dropout=0.5, order=order, seed=3)
    x = SparseFeatures(graph.features) if sparse else as_model_input(graph.features)
    out = model(x, agg, epoch=5)
    labels, mask = torch.from_numpy(graph.labels), torch.from_numpy(graph.train_mask)
    masked_cross_entropy(out, labels, mask).backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("directed", [False, True])
def test_orders_and_feature_kinds_agree_forward_and_backward(directed):
    graph = random_graph(directed=directed, sparse_features=True)
    reference, reference_grads = _forward_and_grads(graph, "aggregate-first", sparse=False)
    for order, sparse in [("transform-first", False), ("transform-first", True), ("auto", True),
                          ("aggregate-first", True)]:
        out, grads = _forward_and_grads(graph, order, sparse=sparse)
        torch.testing.assert_close(out, reference, atol=1e-5, rtol=1e-5)
        for grad, expected in zip(grads, reference_grads, strict=True):
            torch.testing.assert_close(grad, expected, atol=1e-5, rtol=1e-5)


def test_glorot_init_is_seeded_and_bounded():
    a, b, c = GCN(50, 16, 4, seed=1), GCN(50, 16, 4, seed=1), GCN(50, 16, 4, seed=2)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.layers[0].weight, c.layers[0].weight)
    bound = (6 / (50 + 16)) ** 0.5
    assert a.layers[0].weight.abs().max() <= bound and a.layers[0].weight.abs().max() > 0.9 * bound
    assert torch.count_nonzero(a.layers[0].bias) == 0


def test_output_is_log_softmax_and_eval_has_no_dropout():
    graph = random_graph()
    agg = LocalSpMM(gcn_normalize(graph.adj))
    model = GCN(graph.num_features, 16, graph.num_classes, num_layers=1, dropout=0.9)
    x = as_model_input(graph.features)
    out = model(x, agg, epoch=1)
    torch.testing.assert_close(out.exp().sum(dim=1), torch.ones(graph.num_nodes))
    model.eval()
    torch.testing.assert_close(model(x, agg, epoch=1), model(x, agg, epoch=2))


def test_layer_without_bias_and_extra_repr():
    layer = GCNLayer(4, 2, bias=False, order="transform-first")
    assert layer.bias is None and "order=transform-first" in repr(layer)
    assert layer(torch.ones(3, 4), lambda h: h).shape == (3, 2)


def test_global_ids_come_from_the_layout():
    class BlockLayout(LocalLayout):  # rows 10..19 and the second half of the columns, as a grid rank's
        row_range = (10, 20)

        def col_range(self, width):
            return (width // 2, width)

    rows, cols = global_ids(BlockLayout(lambda h: h, "gcn", 10), 8, torch.device("cpu"))
    assert rows.tolist() == list(range(10, 20)) and cols.tolist() == [4, 5, 6, 7]
    layout = as_layout(lambda h: h, "gcn", 5)  # one process, a plain callable: all rows of the input
    rows, cols = global_ids(layout, 8, torch.device("cpu"))
    assert rows.tolist() == list(range(5)) and cols.tolist() == list(range(8))
    layout.set_vertex_order([3, 0, 4, 1, 2])  # a reordered graph: its rows keep their original ids
    assert global_ids(layout, 8, torch.device("cpu"))[0].tolist() == [3, 0, 4, 1, 2]
    with pytest.raises(TypeError, match="num_nodes"):
        LocalLayout(lambda h: h, "gcn")


def test_masked_loss_and_accuracy():
    log_probs = torch.log(torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]))
    labels, mask = torch.tensor([0, 0, 1]), torch.tensor([True, True, False])
    expected = -(torch.log(torch.tensor(0.9)) + torch.log(torch.tensor(0.2))) / 2
    torch.testing.assert_close(masked_cross_entropy(log_probs, labels, mask), expected)
    torch.testing.assert_close(masked_cross_entropy(log_probs, labels, mask, num_selected=4), expected / 2)
    assert masked_accuracy(log_probs, labels, mask) == 0.5
    assert masked_accuracy(log_probs, labels, torch.zeros(3, dtype=torch.bool)) == 0.0


def test_sparse_features_convert_when_dense_enough():
    graph = random_graph(sparse_features=True)
    assert isinstance(as_model_input(graph.features), SparseFeatures)
    assert isinstance(as_model_input(graph.features.toarray()), torch.Tensor)
    dense_enough = sp.csr_matrix(np.ones((5, 4), dtype=np.float32))
    assert isinstance(as_model_input(dense_enough), torch.Tensor)
