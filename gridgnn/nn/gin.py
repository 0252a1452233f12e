"""GIN, as PyG's ``GINConv`` with a two-layer MLP: ``out = MLP((1 + ε) · h_i + Σ_{j ∈ N(i)} h_j)``.

``MLP(z) = ReLU(z W1 + b1) W2 + b2`` with W1 (in, out) and W2 (out, out) (PyG's ``GIN`` model builds
``MLP([in, out, out])``); with ``norm="layer"`` (``--gin-norm layer``) ``ReLU(LN(z W1 + b1)) W2 + b2``, LN a
per-vertex layer norm (`gridgnn.nn.norm`), as the GIN paper's MLP has a norm after its first linear. The sum
is the ``sum`` operator A (backward: Aᵀ). ε is fixed (a buffer) or trainable (a parameter whose gradient
``Σ h ⊙ dz`` is a sum over every element of the graph: each process adds its block's part and the trainer's
gradient reduction sums them). Transform-first is exact for the linear part,
``(1 + ε) h W1 + A (h W1)``, so the narrower of in/out width goes through the SpMM, as for GCN.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gridgnn.config import resolve_order
from gridgnn.config.choices import GIN_NORMS
from gridgnn.nn.layout import Layout, as_layout
from gridgnn.nn.model_config import finite_field, flag_field
from gridgnn.nn.norm import add_layer_norm, layer_norm
from gridgnn.nn.stack import LayerStack, as_dense, glorot
from gridgnn.sparse.csr import SparseBlock


def add_gin_mlp(layer: nn.Module, in_channels: int, out_channels: int, eps: float, train_eps: bool,
                generator: torch.Generator | None, norm: str = "none") -> None:
    """Give a GIN or GINE ``layer`` its MLP and ε, in this order (the model file's and the trace's parameter
    order): ``weight1`` (in, out) Glorot-drawn from ``generator``, zero ``bias1``, with ``norm="layer"`` the
    norm's ``norm_weight`` and ``norm_bias`` (out,) (`gridgnn.nn.norm.add_layer_norm`: no draw, so the weights
    are those of the model without it), ``weight2`` (out, out) Glorot-drawn, zero ``bias2``, ``eps`` (1,) a
    parameter with ``train_eps``, else a buffer."""
    if norm not in GIN_NORMS:
        raise ValueError(f"GIN's norm must be one of {', '.join(GIN_NORMS)}, got {norm!r}")
    layer.norm = norm
    layer.weight1 = glorot(in_channels, out_channels, generator)
    layer.bias1 = nn.Parameter(torch.zeros(out_channels))
    if norm == "layer":
        add_layer_norm(layer, out_channels)
    layer.weight2 = glorot(out_channels, out_channels, generator)
    layer.bias2 = nn.Parameter(torch.zeros(out_channels))
    if train_eps:
        layer.eps = nn.Parameter(torch.tensor([float(eps)]))
    else:
        layer.register_buffer("eps", torch.tensor([float(eps)]))


def gin_mlp_tail(layer: nn.Module, z: Tensor, layout: Layout) -> Tensor:
    """``ReLU(z + b1) W2 + b2`` (``ReLU(LN(z + b1)) W2 + b2`` with the layer norm): the rest of a GIN or GINE
    layer's MLP after its first product ``z`` (m, out block). Collective as `Layout.linear` and, with the norm,
    `Layout.row_sum` (``col`` on 2D/3D)."""
    z = layout.add_bias(z, layer.bias1)
    if layer.norm == "layer":
        z = layer_norm(z, layer.norm_weight, layer.norm_bias, layout)
    hidden = torch.relu(z)
    return layout.add_bias(layout.linear(hidden, layer.weight2), layer.bias2)


class GINLayer(nn.Module):
    """One GIN layer; ``eps`` the initial ε, trainable with ``train_eps``."""

    operator = "sum"

    def __init__(self, in_channels: int, out_channels: int, *, order: str = "auto", eps: float = 0.0,
                 train_eps: bool = False, norm: str = "none", generator: torch.Generator | None = None):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.order = resolve_order(order, in_channels, out_channels)
        add_gin_mlp(self, in_channels, out_channels, eps, train_eps, generator, norm)

    def forward(self, h: Tensor | SparseBlock, layout: Layout) -> Tensor:
        """h: dense (m, in_channels block) or a sparse feature block; returns (m, out_channels block).
        ``layout``: a `Layout`, or a plain single-process callable ``x -> M x``."""
        layout = as_layout(layout, self.operator, h.shape[0])
        if self.order == "transform-first":
            t = layout.linear(h, self.weight1)
            z = layout.aggregate(t) + (1 + self.eps) * t
        else:
            dense = as_dense(h)
            z = layout.linear(layout.aggregate(dense) + (1 + self.eps) * dense, self.weight1)
        return gin_mlp_tail(self, z, layout)

    def extra_repr(self) -> str:
        trainable = isinstance(self.eps, nn.Parameter)
        return f"{self.in_channels}, {self.out_channels}, order={self.order}, train_eps={trainable}, norm={self.norm}"


def pyg_mlp(layer: nn.Module) -> nn.Sequential:
    """PyG's ``Sequential(Linear(in, out), ReLU(), Linear(out, out))`` for the MLP of a GIN or GINE ``layer``
    (with its layer norm: ``Sequential(Linear, LayerNorm(out), ReLU(), Linear)``); its weights come after the
    convolution is built (`load_mlp`: PyG's constructor resets them)."""
    norm = [nn.LayerNorm(layer.out_channels)] if layer.norm == "layer" else []
    return nn.Sequential(nn.Linear(layer.in_channels, layer.out_channels), *norm, nn.ReLU(),
                         nn.Linear(layer.out_channels, layer.out_channels))


def load_mlp(mlp: nn.Sequential, layer: nn.Module) -> None:
    """Copy ``layer``'s ``weight1``, ``bias1``, (its norm's gain and shift,) ``weight2``, ``bias2`` into the
    `pyg_mlp` ``mlp`` (torch's ``Linear`` keeps the transposes)."""
    with torch.no_grad():
        mlp[0].weight.copy_(layer.weight1.detach().T)
        mlp[0].bias.copy_(layer.bias1.detach())
        if layer.norm == "layer":
            mlp[1].weight.copy_(layer.norm_weight.detach())
            mlp[1].bias.copy_(layer.norm_bias.detach())
        mlp[-1].weight.copy_(layer.weight2.detach().T)
        mlp[-1].bias.copy_(layer.bias2.detach())


class GIN(LayerStack):
    """GIN of ``num_layers`` `GINLayer`s (dropout and output: `gridgnn.nn.stack.LayerStack`).

    Model file: the shared fields, ``eps`` (the initial ε), ``train_eps`` and ``norm`` (``none`` or ``layer``;
    absent in files written before it: ``none``); state ``layers.{k}.weight1`` (in, out), ``bias1``, with the
    layer norm ``norm_weight`` and ``norm_bias`` (out,), ``weight2`` (out, out), ``bias2``, ``eps`` (1,). PyG:
    ``GINConv(Sequential(Linear(in, out), ReLU(), Linear(out, out)), eps, train_eps)``, with
    ``LayerNorm(out)`` after the first ``Linear`` with the norm."""

    operator = "sum"
    kind = "gin"
    label = "GIN"
    file_fields = ("eps", "train_eps", "norm")

    def file_config(self) -> dict:
        first = self.layers[0]
        return {**self.stack_config(), "eps": float(first.eps.detach()[0]),
                "train_eps": isinstance(first.eps, nn.Parameter), "norm": first.norm}

    @classmethod
    def check_file_config(cls, config: dict) -> int:
        flag_field(config, "train_eps")
        finite_field(config, "eps")
        if config.get("norm", "none") not in GIN_NORMS:
            raise ValueError(f"norm must be one of {', '.join(GIN_NORMS)}, got {config.get('norm')!r}")
        return 1

    @classmethod
    def from_file_config(cls, config: dict) -> GIN:
        args, kwargs = cls.stack_arguments(config)
        return cls(*args, eps=float(config["eps"]), train_eps=bool(config["train_eps"]),
                   norm=str(config.get("norm", "none")), **kwargs)

    @staticmethod
    def file_options(options) -> dict:
        return {"eps": float(options.gin_eps), "train_eps": bool(options.gin_train_eps),
                "norm": str(options.gin_norm)}

    @staticmethod
    def options_from_file(config: dict) -> dict:
        return {"gin_eps": float(config["eps"]), "gin_train_eps": bool(config["train_eps"]),
                "gin_norm": str(config.get("norm", "none"))}

    @staticmethod
    def file_structure(config) -> dict:
        """The norm: its parameters are part of the state a file must hold to start a training."""
        return {"norm": str(config.gin_norm)}

    def pyg_convs(self) -> list[nn.Module]:
        from torch_geometric.nn import GINConv

        convs = []
        for layer in self.layers:
            conv = GINConv(pyg_mlp(layer), eps=float(layer.eps.detach()[0]),
                           train_eps=isinstance(layer.eps, nn.Parameter))
            load_mlp(conv.nn, layer)
            convs.append(conv)
        return convs

    @classmethod
    def from_config(cls, config, in_channels: int, out_channels: int) -> GIN:
        return cls(in_channels, config.hidden, out_channels, eps=config.gin_eps, train_eps=config.gin_train_eps,
                   norm=config.gin_norm, **cls.common_options(config))

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, *, num_layers: int = 2,
                 dropout: float = 0.5, order: str = "auto", seed: int = 0, eps: float = 0.0,
                 train_eps: bool = False, norm: str = "none"):
        super().__init__(in_channels, hidden_channels, out_channels, num_layers=num_layers, dropout=dropout,
                         order=order, seed=seed, eps=eps, train_eps=train_eps, norm=norm)

    def make_layer(self, in_channels, out_channels, *, order, generator, eps=0.0, train_eps=False, norm="none"):
        return GINLayer(in_channels, out_channels, order=order, eps=eps, train_eps=train_eps, norm=norm,
                        generator=generator)
