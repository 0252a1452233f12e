"""GAT (Veličković et al., ICLR 2018), as PyG's ``GATConv`` (self-loops added, LeakyReLU slope 0.2).

One layer with K heads of C channels: ``x' = h W`` (W of shape (in, K·C)), per head the score terms
``s_src = x'_h · a_src_h`` and ``s_dst = x'_h · a_dst_h`` (K scalars per vertex, `Layout.head_sum`),
``e_ij = LeakyReLU(s_dst[i] + s_src[j])`` over the in-neighbours j of i and i itself (the ``gat`` operator's
pattern), ``α = softmax_j(e_ij)``, attention dropout on α, ``out_i = Σ_j α_ij x'_j`` (`Layout.attend`). Hidden
layers concatenate the K heads (width K·C), the output layer averages its heads (width C), then the bias.

Attention dropout is layout-invariant: edge (global row i, global column j) of head h in layer k is kept
by the counter-based hash of stream ``ATTENTION_STREAM + k · MAX_HEADS + h`` (`gridgnn.nn.dropout.stored_keep`).

With edge features (``edge_dim`` = d, ``--edge-dim``; PyG's ``GATConv(edge_dim=d)``) each head's score has an edge
term, ``e_ij = LeakyReLU(s_dst[i] + s_src[j] + (e_ji W_e)_h · a_edge_h)`` (W_e (d, K·C), a_edge (K, C)); the
self-loop's features are the mean of the vertex's incoming edges' (PyG's ``fill_value="mean"``,
`gridgnn.data.edge_features.operator_rows`). The layer then runs as message passing
(`gridgnn.nn.message_passing`: the edge softmax where the edges live, the source rows from the halo), on every
grid: its scores are separable over feature columns (sums of per-column products), so a 2D/3D process forms
their parts from its columns and `Layout.edge_sum` totals them; attention dropout draws its masks by the edges'
original ids, as the tiles do.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from gridgnn.config import MAX_EDGE_FEATURES, MAX_HEADS
from gridgnn.errors import ConfigError
from gridgnn.nn.dropout import stored_keep
from gridgnn.nn.layout import Layout, as_layout
from gridgnn.nn.message_passing import aggregate_messages
from gridgnn.nn.model_config import fraction_field, integer_field
from gridgnn.nn.stack import LayerStack, glorot
from gridgnn.sparse.attention import head_partial_sums
from gridgnn.sparse.csr import SparseBlock

NEGATIVE_SLOPE = 0.2
ATTENTION_STREAM = 1 << 40
"""Dropout stream ids of the attention coefficients start here (feature dropout uses the layer index)."""


def _uniform(shape: tuple[int, ...], bound: float, generator: torch.Generator | None) -> nn.Parameter:
    value = torch.empty(shape)
    value.uniform_(-bound, bound, generator=generator)
    return nn.Parameter(value)


def check_heads(heads: int, what: str = "heads") -> int:
    """``heads`` when it is an integer in [1, `MAX_HEADS`], else `ConfigError`."""
    if isinstance(heads, bool) or not isinstance(heads, int) or not 1 <= heads <= MAX_HEADS:
        raise ConfigError(f"{what} must be an integer from 1 to {MAX_HEADS}, got {heads!r}")
    return heads


class GATLayer(nn.Module):
    """One GAT layer: weight (in_channels, heads · out_channels), att_src and att_dst (heads, out_channels),
    bias (heads · out_channels when ``concat``, else out_channels). ``out_channels`` is C, per head."""

    operator = "gat"
    order = "transform-first"
    column_separable = True
    """With edge features the layer passes messages whose scores are sums over feature columns and whose
    messages scale each column by its head's coefficient: 2D and 3D run them on each process's columns."""

    def __init__(self, in_channels: int, out_channels: int, *, heads: int = 1, concat: bool = True,
                 attn_dropout: float = 0.0, generator: torch.Generator | None = None, edge_dim: int = 0):
        super().__init__()
        self.in_channels, self.channels, self.heads = in_channels, out_channels, check_heads(heads)
        self.concat, self.attn_dropout = concat, attn_dropout
        self.out_channels = heads * out_channels if concat else out_channels
        self.weight = glorot(in_channels, heads * out_channels, generator)
        bound = math.sqrt(6.0 / (heads + out_channels))
        self.att_src = _uniform((heads, out_channels), bound, generator)
        self.att_dst = _uniform((heads, out_channels), bound, generator)
        self.bias = nn.Parameter(torch.zeros(self.out_channels))
        self.edge_dim = edge_dim
        if edge_dim:  # the edge term of the scores (module docstring)
            self.edge_weight = glorot(edge_dim, heads * out_channels, generator)
            self.att_edge = _uniform((heads, out_channels), bound, generator)
        self.stream: dict | None = None

    def _drop(self):
        """The attention-dropout factors of a tile, or None (eval mode, p = 0 or no stream set)."""
        stream, p = self.stream, self.attn_dropout
        if stream is None or not stream["training"] or p == 0.0:
            return None
        base = ATTENTION_STREAM + stream["layer"] * MAX_HEADS

        def drop(block, row_ids, col_ids):
            keeps = [stored_keep(block.rows, block.cols, block.shape, p, seed=stream["seed"], epoch=stream["epoch"],
                                 layer=base + h, row_ids=row_ids, col_ids=col_ids) for h in range(self.heads)]
            return torch.stack(keeps, dim=1).to(self.weight.dtype) * (1.0 / (1.0 - p))

        return drop

    def forward(self, h: Tensor | SparseBlock, layout: Layout) -> Tensor:
        """h: dense (m, in_channels block) or a sparse feature block; returns (m, out_channels block).
        ``layout``: a `Layout` (the score terms are whole on every process holding a row)."""
        layout = as_layout(layout, self.operator, h.shape[0])
        width = self.heads * self.channels
        c0, c1 = layout.col_range(width)
        x = layout.linear(h, self.weight)
        if self.edge_dim:
            out = self._attend_edges(x, layout)
            if not self.concat and self.heads > 1:
                out = layout.head_mean(out, self.heads, width)
            return layout.add_bias(out, self.bias)
        s_src = layout.head_sum(x * self.att_src.reshape(-1)[c0:c1], self.heads, width)
        s_dst = layout.head_sum(x * self.att_dst.reshape(-1)[c0:c1], self.heads, width)
        out = layout.attend(x, s_dst, s_src, heads=self.heads, width=width, negative_slope=NEGATIVE_SLOPE,
                            drop=self._drop())
        if not self.concat and self.heads > 1:
            out = layout.head_mean(out, self.heads, width)
        return layout.add_bias(out, self.bias)

    def edge_values(self, width: int, edge_features: int) -> int:
        """Per edge, for the memory model (with ``edge_dim``): the gathered source rows, the edge term's product
        and the weighted messages (K·C each, ``width``), and a few K-wide score arrays."""
        return 3 * width + 6 * self.heads

    def edge_temporaries(self, width: int, edge_features: int) -> int:
        """Per edge while the layer runs: two gradients of its K·C-wide arrays in backward."""
        return 2 * width

    def _edge_drop(self, edges, layout: Layout) -> Tensor | None:
        """(E, K) attention-dropout factors of the message path (0 or 1 / (1 - p)), or None (eval mode, p = 0,
        no stream set): `_drop`'s masks on the edges' original (destination, source) ids, so every layout
        draws the same masks."""
        drop = self._drop()  # an EdgeSet is the pattern the masks are drawn on, as a tile is
        return None if drop is None else drop(edges, layout.row_ids(edges.dst.device), edges.source_ids)

    def _attend_edges(self, x: Tensor, layout: Layout) -> Tensor:
        """Attention with the edge term, as message passing over ``layout.edges()`` (the ``gat`` pattern's
        entries, self-loops included, with their features): x (m, block of the K·C columns) -> the same. Each
        process forms the three score terms from its columns only (partial sums per head), adds them per edge
        and lets ``layout.edge_sum`` total them (2D/3D: over the grid row's processes, which run the same edges
        on their columns); the softmax then runs on whole scores, the messages on the process's columns.
        Collective as ``layout.source_rows`` (``row``) and ``layout.edge_sum`` (``col`` on 2D/3D)."""
        heads, channels = self.heads, self.channels
        edges = layout.edges()
        if edges.attr is None:
            raise ValueError("GAT with edge_dim needs edge features: the layout's edges carry none")
        c0, c1 = layout.col_range(heads * channels)
        sources = layout.source_rows(x)  # (m + halo, c1 - c0)
        s_src = self._head_partials(sources, self.att_src, c0, c1)  # (m + halo, K)
        s_dst = self._head_partials(x, self.att_dst, c0, c1)  # (m, K)
        s_edge = self._head_partials(edges.attr @ self.edge_weight[:, c0:c1], self.att_edge, c0, c1)  # (E, K)
        score = layout.edge_sum(s_src[edges.src] + s_dst[edges.dst] + s_edge)
        score = torch.nn.functional.leaky_relu(score, NEGATIVE_SLOPE)
        # the softmax over each row's edges, shifted by the row's maximum (held fixed, as PyG's softmax)
        peak = score.detach().new_full((edges.num_rows, heads), -torch.inf).scatter_reduce(
            0, edges.dst.view(-1, 1).expand(-1, heads), score.detach(), "amax", include_self=True)
        weight = torch.exp(score - peak[edges.dst])
        total = aggregate_messages(weight, edges.dst, edges.num_rows, "sum")
        alpha = weight / total[edges.dst]
        factors = self._edge_drop(edges, layout)
        if factors is not None:
            alpha = alpha * factors
        if (c0, c1) == (0, heads * channels):
            messages = (alpha.unsqueeze(-1) * sources[edges.src].view(-1, heads, channels)).reshape(-1, c1)
        else:  # the process's columns: column c belongs to head c // C
            head_of = torch.arange(c0, c1, device=alpha.device) // channels
            messages = alpha[:, head_of] * sources[edges.src]
        return aggregate_messages(messages, edges.dst, edges.num_rows, "sum")

    def _head_partials(self, t: Tensor, vector: Tensor, c0: int, c1: int) -> Tensor:
        """(rows, K): per head, the sum over this process's columns ``c0:c1`` of the K·C-wide products of ``t``
        (rows, c1 - c0) with ``vector`` (K, C) (all of a head's columns on one process: the head's score term)."""
        heads, channels = self.heads, self.channels
        if (c0, c1) == (0, heads * channels):
            return (t.view(-1, heads, channels) * vector).sum(dim=-1)
        return head_partial_sums(t * vector.reshape(-1)[c0:c1], heads, heads * channels, (c0, c1))

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.channels}, heads={self.heads}, concat={self.concat}, "
                f"attn_dropout={self.attn_dropout}" + (f", edge_dim={self.edge_dim}" if self.edge_dim else ""))


class GAT(LayerStack):
    """GAT of ``num_layers`` `GATLayer`s: hidden layers of ``heads`` heads of ``hidden_channels`` channels
    (concatenated: width heads · hidden_channels), the output layer of ``output_heads`` heads of
    ``out_channels`` (averaged). Dropout, ReLU and output: `gridgnn.nn.stack.LayerStack`.

    Model file: the shared fields (``hidden_channels`` the width of one head), ``heads``, ``output_heads``,
    ``attn_dropout``, ``edge_dim`` (0: no edge features; absent in older files); state ``layers.{k}.weight`` (in,
    K·C), ``att_src``, ``att_dst`` (K, C), ``bias`` (K·C, or C on the output layer), and with edge features
    ``edge_weight`` (d, K·C) and ``att_edge`` (K, C). PyG: ``GATConv(in, C, heads=K, concat=..., edge_dim=d or
    None)`` with ``lin.weight = Wᵀ``, ``att_src``/``att_dst`` (and ``att_edge``) of shape (1, K, C),
    ``lin_edge.weight = W_eᵀ``, ``bias = b``."""

    operator = "gat"
    kind = "gat"
    label = "GAT"
    file_fields = ("heads", "output_heads", "attn_dropout", "edge_dim")

    @classmethod
    def reads_edge_features(cls, config) -> bool:
        return bool(getattr(config, "edge_dim", 0))

    def file_config(self) -> dict:
        config = {**self.stack_config(), "heads": self.heads, "output_heads": self.output_heads,
                  "attn_dropout": self.attn_dropout, "edge_dim": self.edge_dim}
        if len(self.layers) > 1:
            config["hidden_channels"] = self.hidden_per_head
        return config

    @classmethod
    def check_file_config(cls, config: dict) -> int:
        heads = integer_field(config, "heads", 1, MAX_HEADS)
        integer_field(config, "output_heads", 1, MAX_HEADS)
        fraction_field(config, "attn_dropout")
        if "edge_dim" in config:
            integer_field(config, "edge_dim", 0, MAX_EDGE_FEATURES)
        return heads  # the hidden layers concatenate their heads

    @classmethod
    def from_file_config(cls, config: dict) -> GAT:
        args, kwargs = cls.stack_arguments(config)
        return cls(*args, heads=int(config["heads"]), output_heads=int(config["output_heads"]),
                   attn_dropout=float(config["attn_dropout"]), edge_dim=int(config.get("edge_dim", 0)), **kwargs)

    @staticmethod
    def file_options(options) -> dict:
        return {"heads": int(options.heads), "output_heads": int(options.output_heads),
                "attn_dropout": float(options.attn_dropout), "edge_dim": int(getattr(options, "edge_dim", 0))}

    @staticmethod
    def options_from_spec(spec) -> dict:
        return {"edge_dim": int(spec.edge_features)}  # a spec counts the edge features the model reads

    @staticmethod
    def options_from_file(config: dict) -> dict:
        return {"heads": int(config["heads"]), "output_heads": int(config["output_heads"]),
                "attn_dropout": float(config["attn_dropout"]), "edge_dim": int(config.get("edge_dim", 0))}

    def pyg_convs(self) -> list[nn.Module]:
        from torch_geometric.nn import GATConv

        convs = []
        for layer in self.layers:
            conv = GATConv(layer.in_channels, layer.channels, heads=layer.heads, concat=layer.concat,
                           edge_dim=layer.edge_dim or None)
            with torch.no_grad():
                conv.lin.weight.copy_(layer.weight.detach().T)
                conv.att_src.copy_(layer.att_src.detach()[None])
                conv.att_dst.copy_(layer.att_dst.detach()[None])
                conv.bias.copy_(layer.bias.detach())
                if layer.edge_dim:
                    conv.lin_edge.weight.copy_(layer.edge_weight.detach().T)
                    conv.att_edge.copy_(layer.att_edge.detach()[None])
            convs.append(conv)
        return convs

    @staticmethod
    def file_structure(config) -> dict:
        return {"heads": config.heads, "output_heads": config.output_heads,
                "edge_dim": int(getattr(config, "edge_dim", 0))}

    @classmethod
    def from_config(cls, config, in_channels: int, out_channels: int, edge_dim: int = 0) -> GAT:
        return cls(in_channels, config.hidden, out_channels, heads=config.heads, output_heads=config.output_heads,
                   attn_dropout=config.attn_dropout, edge_dim=edge_dim, **cls.common_options(config))

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, *, num_layers: int = 2,
                 dropout: float = 0.5, order: str = "auto", seed: int = 0, heads: int = 1, output_heads: int = 1,
                 attn_dropout: float = 0.0, edge_dim: int = 0):
        check_heads(heads)
        check_heads(output_heads, "output_heads")
        if isinstance(attn_dropout, bool) or not isinstance(attn_dropout, (int, float)) \
                or not 0.0 <= attn_dropout < 1.0:
            raise ConfigError(f"attn_dropout must be a number in [0, 1), got {attn_dropout!r}")
        self.hidden_per_head, self._made = hidden_channels, 0
        super().__init__(in_channels, hidden_channels * heads, out_channels, num_layers=num_layers,
                         dropout=dropout, order=order, seed=seed, heads=heads, output_heads=output_heads,
                         attn_dropout=float(attn_dropout), last_width=out_channels, num_hidden=num_layers - 1,
                         edge_dim=edge_dim)
        del self._made
        self.heads, self.output_heads, self.attn_dropout = heads, output_heads, float(attn_dropout)
        self.edge_dim = edge_dim

    def make_layer(self, in_channels, out_channels, *, order, generator, heads=1, output_heads=1,
                   attn_dropout=0.0, last_width=None, num_hidden=0, edge_dim=0):
        del order  # attention transforms first, always
        last = self._made == num_hidden
        self._made += 1
        if last:
            return GATLayer(in_channels, last_width, heads=output_heads, concat=False, attn_dropout=attn_dropout,
                            generator=generator, edge_dim=edge_dim)
        return GATLayer(in_channels, out_channels // heads, heads=heads, concat=True, attn_dropout=attn_dropout,
                        generator=generator, edge_dim=edge_dim)

    def apply_layer(self, index: int, layer: nn.Module, h, layout, stream: dict) -> Tensor:
        layer.stream = dict(stream, layer=index)
        try:
            return layer(h, layout)
        finally:
            layer.stream = None
