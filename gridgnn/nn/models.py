"""Model kinds by name (``--model``): which class, which aggregation operator, built from a `TrainConfig`.

What each kind asks of its `gridgnn.nn.layout.Layout` per layer (the same on every algorithm; the cost model
reads it from the model's own forward, `gridgnn.nn.trace`, and says what it costs on each grid):

=====  ========  ====================================  ==================================================
kind   operator  products with a replicated weight     parameters (gradients summed over ``row`` on
                                                       1d/1.5d, over the world on 2d/3d)
=====  ========  ====================================  ==================================================
gcn    gcn (Â)   H W                                   W, b
sage   mean      H W_neigh (or mean(H) W_neigh), H     W_neigh, W_root, b (``row_sum`` for normalize)
                 W_root
gin    sum (A)   H W1 (or ((1+ε)H + A H) W1), Z W2     W1, b1, W2, b2, and ε when trained
gat    gat       H W (then ``head_sum`` for the score     W, a_src, a_dst, b
       (A + I)   terms and ``attend``)
gine   sum (A)   messages ReLU(x_j + W_e e_ij + b_e) on     W_e, b_e, W1, b1, W2, b2, and ε when trained
                 the edges (``source_rows``), then Z W1,
                 Z W2
mesh-  sum (A)   edge MLP of [e, x_i, x_j] on the edges    each layer's edge and vertex MLPs (torch
graph-           (``source_rows``), vertex MLP of          ``Linear``, read directly: 1D/1.5D only)
net              [x, Σ e']
=====  ========  ====================================  ==================================================
"""

from __future__ import annotations

from gridgnn.data.operators import has_self_loops
from gridgnn.errors import ConfigError
from gridgnn.nn.gat import GAT
from gridgnn.nn.gcn import GCN
from gridgnn.nn.gin import GIN
from gridgnn.nn.gine import GINE
from gridgnn.nn.meshgraphnet import MeshGraphNet
from gridgnn.nn.message_passing import require_edge_features
from gridgnn.nn.sage import SAGE
from gridgnn.nn.stack import LayerStack

MODELS: dict[str, type[LayerStack]] = {"gcn": GCN, "sage": SAGE, "gin": GIN, "gat": GAT, "gine": GINE,
                                       "meshgraphnet": MeshGraphNet}
"""The registry of model kinds: ``--model`` name -> model class, and the one place that knows them all.
Everything else asks the class: its ``operator`` (`gridgnn.data.operators`: the matrix it aggregates with, and
so its self-loop rule, `self_loops_of`), how it builds itself from a configuration (`LayerStack.from_config`),
its display name (``label``, `label_of`), its model-file layout and PyG mapping (``file_fields``,
``file_config``, ``check_file_config``, ``from_file_config``, ``pyg_convs``: `gridgnn.nn.export`); what it
costs on each grid is read from its own forward (`gridgnn.nn.trace`), parameters read whole included. A new
kind is its own module, one entry here and its name in `gridgnn.config.choices.MODELS` (the names a configuration
accepts, at the bottom layer, which cannot import this one); the validation of the kinds' own options in a
`gridgnn.config.TrainConfig` (``--sage-normalize`` only with sage, ...) stays there for the same reason."""


def label_of(model: str) -> str:
    """How summaries name the model kind ``model`` (``gat`` -> ``GAT``, ``sage`` -> ``GraphSAGE-mean``): its
    class's ``label``, or the kind name itself when the class has none (or the kind is not registered)."""
    cls = MODELS.get(model)
    return (cls.label if cls is not None else "") or model


def operator_of(model: str) -> str:
    """The aggregation operator of the model kind ``model`` (``gcn`` -> ``gcn``, ``sage`` -> ``mean``,
    ``gin`` -> ``sum``, ``gat`` -> ``gat``)."""
    return MODELS[model].operator


def self_loops_of(model: str) -> bool:
    """Whether the operator of the model kind ``model`` has A + I's pattern (GCN, GAT) rather than A's (SAGE,
    GIN): the graph statistics its price is computed on (`gridgnn.data.operators.has_self_loops`)."""
    return has_self_loops(operator_of(model))


def build_model(config, num_features: int, num_classes: int, task: str = "multiclass",
                num_edge_features: int = 0) -> LayerStack:
    """The model ``config.model`` describes (a `gridgnn.config.TrainConfig` or anything with its fields),
    initialized from ``config.seed``, its output for ``task`` (`LayerStack.for_task`); a kind that reads edge
    features (``edge_inputs``) gets ``num_edge_features`` of them."""
    cls = MODELS[getattr(config, "model", "gcn")]
    if cls.reads_edge_features(config):
        return cls.from_config(config, num_features, num_classes, num_edge_features).for_task(task)
    return cls.from_config(config, num_features, num_classes).for_task(task)


def reads_edges(config) -> bool:
    """Whether the model ``config`` describes reads the graph's edge features (`LayerStack.reads_edge_features`:
    GINE and MeshGraphNet always, GAT with ``--edge-dim``); it then passes messages: on every grid when they are
    separable over feature columns (GINE, GAT), else on 1D and 1.5D only (MeshGraphNet)."""
    return MODELS[getattr(config, "model", "gcn")].reads_edge_features(config)


def check_edge_inputs(config, num_edge_features: int) -> None:
    """Raise `ConfigError` (one line, before any collective) when the model ``config`` describes reads edge
    features the graph lacks (or of another width than its ``edge_dim`` says), or edge features were given by
    file (``config.edge_features``, ``--edge-features``) to a model that reads none."""
    model, edge_file, edge_dim = config.model, getattr(config, "edge_features", None), getattr(config, "edge_dim", 0)
    if reads_edges(config):
        require_edge_features(f"{model} --edge-dim" if edge_dim else model, num_edge_features)
    if edge_dim and num_edge_features != edge_dim:
        raise ConfigError(f"--edge-dim {edge_dim} was given, but the graph's edges have {num_edge_features} "
                          "features each")
    if not reads_edges(config) and edge_file:
        readers = [k for k, c in MODELS.items() if c.edge_inputs] + ["gat --edge-dim D"]
        raise ConfigError(f"--edge-features {edge_file} was given, but --model {model} reads no edge features "
                          f"(models that do: {', '.join(readers)})")
