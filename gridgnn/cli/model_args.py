"""``--model`` and each model kind's options, shared by ``train`` and ``plan`` (no torch import)."""

from __future__ import annotations

import gridgnn.config.choices
from gridgnn.config import TrainConfig

_DEFAULTS = TrainConfig()


def model_label(kind: str) -> str:
    """How summaries name the ``--model`` ``kind``: its class's label (a built-in kind's from the committed
    templates, `gridgnn.plan.op_templates.label_of`, so that `plan` needs no torch; another's from its class)."""
    from gridgnn.plan.op_templates import label_of

    return label_of(kind)


def model_flags(spec) -> list[str]:
    """The ``gridgnn train`` flags that select the model of ``spec`` (a `ModelSpec`); none for GCN."""
    flags = [] if spec.model == "gcn" else ["--model", spec.model]
    heads = getattr(spec, "heads", 1), getattr(spec, "output_heads", 1)
    return flags + (["--sage-normalize"] if spec.sage_normalize else []) + (
        ["--gin-train-eps"] if spec.gin_train_eps else []) + (
        ["--gin-norm", spec.gin_norm] if getattr(spec, "gin_norm", "none") != "none" else []) + (
        ["--heads", str(heads[0])] if heads[0] != 1 else []) + (
        ["--output-heads", str(heads[1])] if heads[1] != 1 else []) + (
        ["--attn-dropout", str(spec.attn_dropout)] if getattr(spec, "attn_dropout", 0.0) else []) + (
        ["--edge-dim", str(spec.edge_features)] if spec.model == "gat" and getattr(spec, "edge_features", 0) else [])


def add_model_arguments(group, *, eps_value: bool = True) -> None:
    """Add ``--model``, ``--sage-normalize``, ``--gin-train-eps``, ``--gin-norm``, (``eps_value``) ``--gin-eps``
    and GAT's ``--heads``, ``--output-heads``, ``--attn-dropout`` to the argument group ``group``."""
    group.add_argument("--model", choices=gridgnn.config.choices.MODELS, default=_DEFAULTS.model,
                       help="gcn: Â H W; sage: GraphSAGE-mean with root weight; gin: MLP((1+ε) h + Σ neighbours); "
                            "gat: graph attention (PyG's GATConv); gine: GIN with edge features (PyG's GINEConv); "
                            "meshgraphnet: edge features updated per layer "
                            "(default: %(default)s)")
    group.add_argument("--sage-normalize", action="store_true",
                       help="L2-normalize the rows of every SAGE layer's output (PyG's normalize=True)")
    if eps_value:
        group.add_argument("--gin-eps", type=float, default=_DEFAULTS.gin_eps, metavar="EPS",
                           help="GIN's ε (the initial value with --gin-train-eps) (default: %(default)s)")
    group.add_argument("--gin-train-eps", action="store_true", help="make GIN's ε a trained parameter")
    group.add_argument("--gin-norm", choices=gridgnn.config.choices.GIN_NORMS, default=_DEFAULTS.gin_norm,
                       help="GIN and GINE: the norm after the first linear of every layer's MLP; layer: a per-vertex "
                            "LayerNorm (the sum of many neighbours' rows then trains on dense, high-degree graphs "
                            "such as Amazon's) (default: %(default)s)")
    group.add_argument("--heads", type=int, default=_DEFAULTS.heads, metavar="K",
                       help="GAT: attention heads of every hidden layer, concatenated (each --hidden wide) "
                            "(default: %(default)s)")
    group.add_argument("--output-heads", type=int, default=_DEFAULTS.output_heads, metavar="K",
                       help="GAT: attention heads of the output layer, averaged (default: %(default)s)")
    group.add_argument("--attn-dropout", type=float, default=_DEFAULTS.attn_dropout, metavar="P",
                       help="GAT: dropout of the attention coefficients (default: %(default)s)")
    group.add_argument("--edge-dim", type=int, default=_DEFAULTS.edge_dim, metavar="D",
                       help="GAT: the graph's D edge features enter every head's score (PyG's GATConv(edge_dim=D)); "
                            "every grid (default: none)")
