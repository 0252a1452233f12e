"""What every model of gridgnn shares: a stack of layers, layout-invariant dropout, ReLU, log-softmax.

Widths ``in -> hidden ... hidden -> out``; dropout on every layer's input (the input features too, as Kipf &
Welling), ReLU between layers, log-softmax on all class columns of the rows (`Layout.full_rows`; raw outputs for
multilabel and regression targets: `LayerStack.output`). A model
subclass names its aggregation ``operator`` and builds its layers (`LayerStack.make_layer`); each layer is
``layer(h, layout) -> z``, single-device math over the `gridgnn.nn.layout.Layout` it is given.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gridgnn.errors import ConfigError
from gridgnn.limits import MAX_LAYERS, check_weight_matrix
from gridgnn.nn.dropout import dropout, relu_dropout
from gridgnn.nn.features import SparseFeatures
from gridgnn.nn.layout import Layout, as_layout, global_ids, input_ids
from gridgnn.sparse.csr import SparseBlock


def glorot(in_channels: int, out_channels: int, generator: torch.Generator | None) -> nn.Parameter:
    """A Glorot-uniform (in_channels, out_channels) weight drawn from ``generator``."""
    weight = nn.Parameter(torch.empty(in_channels, out_channels))
    nn.init.xavier_uniform_(weight, generator=generator)
    return weight


def as_dense(h: Tensor | SparseBlock) -> Tensor:
    """A dense copy of a sparse feature block (a dense tensor is returned as is)."""
    return h.csr.to_dense() if isinstance(h, SparseBlock) else h


def check_model_size(in_channels: int, hidden_channels: int, out_channels: int, num_layers: int) -> list[int]:
    """The layer widths ``[in, hidden, ..., hidden, out]`` after checking that every weight matrix fits in a
    tensor and in this machine's memory (`ConfigError` naming it, before any allocation)."""
    if num_layers > MAX_LAYERS:
        raise ConfigError(f"num_layers must be at most {MAX_LAYERS}, got {num_layers}")
    widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
    fix = (f"lower --hidden (now {hidden_channels}) or check the dataset's feature and class counts "
           f"({in_channels}, {out_channels})")
    for index, (w_in, w_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        check_weight_matrix(w_in, w_out, f"weight matrix of layer {index + 1}", fix)
    return widths


OUTPUTS = {"multiclass": "log_softmax", "multilabel": "identity", "regression": "identity"}
"""Task -> `LayerStack.output`."""


class LayerStack(nn.Module):
    """``num_layers`` layers made by `make_layer`; ``seed`` drives the Glorot initialization (its own
    generator, so every process builds identical weights) and the dropout masks."""

    operator = "gcn"
    kind = "gcn"
    task = "multiclass"
    output = "log_softmax"
    """What the last layer's rows go through for `task`: ``log_softmax`` (class log-probabilities,
    multiclass) or ``identity`` (logits or values: multilabel, regression); set per instance with
    `for_task`."""

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, *, num_layers: int = 2,
                 dropout: float = 0.5, order: str = "auto", seed: int = 0, **layer_options):
        super().__init__()
        if num_layers < 1:
            raise ConfigError(f"num_layers must be at least 1, got {num_layers}")
        widths = check_model_size(in_channels, hidden_channels, out_channels, num_layers)
        generator = torch.Generator().manual_seed(seed)
        self.layers = nn.ModuleList(
            self.make_layer(w_in, w_out, order=order, generator=generator, **layer_options)
            for w_in, w_out in zip(widths[:-1], widths[1:], strict=True)
        )
        self.dropout, self.seed = dropout, seed

    target_shift: list[float] | None = None
    target_scale: list[float] | None = None
    """Regression with standardized targets (``--standardize-targets``): the network learns each target in
    units of its training entries' standard deviation around their mean, and `forward` returns
    ``z * target_scale + target_shift`` (one value per output column), the targets' own units."""
    _affine_cache: tuple | None = None

    def for_task(self, task: str, shift: list[float] | None = None, scale: list[float] | None = None) -> LayerStack:
        """Set `output` for ``task`` (`gridgnn.data.targets.TASKS`) and, for a regression, the standardization
        ``shift``/``scale`` (one float per output, or None); returns the model."""
        if (shift is None) != (scale is None) or (shift is not None and task != "regression"):
            raise ConfigError("target shift and scale go together, and only with a regression task")
        if scale is not None and not len(shift) == len(scale) == self.layers[-1].out_channels:
            raise ConfigError(f"target shift and scale need {self.layers[-1].out_channels} values each")
        self.task, self.output = task, OUTPUTS[task]
        self.target_shift = None if shift is None else [float(v) for v in shift]
        self.target_scale = None if scale is None else [float(v) for v in scale]
        self._affine_cache = None
        return self

    @classmethod
    def from_config(cls, config, in_channels: int, out_channels: int) -> LayerStack:
        """The model of this kind a `gridgnn.config.TrainConfig` (or anything with its fields) describes:
        ``layers``, ``hidden``, ``dropout``, ``order``, ``seed``, and the kind's own options (a subclass with
        options reads them here)."""
        return cls(in_channels, config.hidden, out_channels, **cls.common_options(config))

    @staticmethod
    def common_options(config) -> dict:
        """The constructor options every kind takes, from ``config``."""
        return dict(num_layers=config.layers, dropout=config.dropout, order=config.order, seed=config.seed)

    # --- what a kind says about itself beyond its forward: its name in summaries, its model file, PyG -------

    edge_inputs = False
    """Whether the kind always reads the graph's edge features (its ``from_config`` then takes their count:
    `gridgnn.nn.models.build_model`)."""

    @classmethod
    def reads_edge_features(cls, config) -> bool:
        """Whether the model ``config`` describes reads edge features: `edge_inputs`, or what a kind with an
        option for them (GAT's ``edge_dim``) says."""
        return cls.edge_inputs

    label = ""
    """How ``gridgnn plan`` and ``train`` name this kind on their model line (`gridgnn.nn.models.label_of`);
    empty: the kind name itself."""

    file_fields: tuple[str, ...] | None = None
    """This kind's own fields in a model file's ``config`` (`gridgnn.nn.export`), written after the fields every
    kind shares (`stack_config`); None: the kind has no model-file layout, and saving, loading or converting one
    is refused (`ConfigError`) when asked for, and nowhere else."""

    @classmethod
    def no_layout(cls, what: str) -> ConfigError:
        """The error for asking ``what`` of a kind without a model-file layout or PyG mapping."""
        return ConfigError(f"a model of kind {cls.kind} cannot be {what}: its class ({cls.__name__}) defines no "
                           f"{'PyTorch Geometric mapping' if 'PyG' in what else 'model-file layout'}")

    def stack_config(self) -> dict:
        """The model-file ``config`` fields every kind shares: in_channels, hidden_channels, out_channels,
        num_layers, order (one order, or ``auto`` when the layers differ or name none), dropout, seed, task, and a
        standardized regression's target_shift and target_scale."""
        first, last = self.layers[0], self.layers[-1]
        orders = {getattr(layer, "order", "auto") for layer in self.layers}  # a kind with one order names none
        return {"in_channels": first.in_channels,
                "hidden_channels": first.out_channels if len(self.layers) > 1 else last.out_channels,
                "out_channels": last.out_channels, "num_layers": len(self.layers),
                "order": orders.pop() if len(orders) == 1 else "auto", "dropout": self.dropout, "seed": self.seed,
                "task": self.task, **({"target_shift": self.target_shift, "target_scale": self.target_scale}
                                      if self.target_scale is not None else {})}

    @staticmethod
    def stack_arguments(config: dict) -> tuple[tuple, dict]:
        """The positional (in, hidden, out) and shared keyword arguments of a constructor from a model file's
        ``config`` (checked: `gridgnn.nn.model_config.check_model_config`)."""
        return ((config["in_channels"], config["hidden_channels"], config["out_channels"]),
                {"num_layers": config["num_layers"], "dropout": config["dropout"], "order": config["order"],
                 "seed": config["seed"]})

    def file_config(self) -> dict:
        """This model's model-file ``config``: `stack_config`, then the kind's `file_fields`."""
        raise self.no_layout("saved to a model file")

    @classmethod
    def check_file_config(cls, config: dict) -> int:
        """Raise ValueError naming the first bad field of this kind's own (`file_fields`) in a model file's
        ``config``; returns how many columns one hidden unit spans in the hidden layers' width (GAT: its heads;
        1 otherwise), for the file's size check (`gridgnn.nn.model_config.check_state_covers`)."""
        raise cls.no_layout("read from a model file")

    @classmethod
    def from_file_config(cls, config: dict) -> LayerStack:
        """A fresh model from a checked model-file ``config`` (`check_file_config`), its task not yet set."""
        raise cls.no_layout("read from a model file")

    @staticmethod
    def file_options(options) -> dict:
        """This kind's own model-file fields (`file_fields`) from a run's ``options`` (a
        `gridgnn.config.TrainConfig`, or anything with its fields: a checkpoint's recorded configuration);
        none by default."""
        return {}

    @staticmethod
    def options_from_file(config: dict) -> dict:
        """The reverse of `file_options`: the `gridgnn.config.TrainConfig` fields of this kind's own options
        from a checked model-file ``config`` (``gridgnn predict`` describes its run with them); none by
        default."""
        return {}

    @staticmethod
    def options_from_spec(spec) -> dict:
        """The `gridgnn.config.TrainConfig` fields of this kind's own options that a
        `gridgnn.cost.epoch_model.ModelSpec` ``spec`` fixes beyond its own fields (the trace builds the model from
        the spec with them, `gridgnn.nn.trace`); none by default."""
        return {}

    @staticmethod
    def file_structure(config) -> dict:
        """The model-file ``config`` fields of this kind, beyond the widths and layer count every kind has, that
        a `gridgnn.config.TrainConfig` ``config`` fixes and a model file must share to start its training
        (``--init-from``, `gridgnn.train.checkpoint.init_from`): GAT's heads; none for most kinds."""
        return {}

    def pyg_convs(self) -> list[nn.Module]:
        """PyTorch Geometric convolutions holding this model's weights, one per layer (`gridgnn.nn.export.to_pyg`
        stacks them with ReLU between and the output after); torch_geometric is imported here, when asked."""
        raise self.no_layout("converted to PyG")

    def make_layer(self, in_channels: int, out_channels: int, *, order: str, generator: torch.Generator,
                   **options) -> nn.Module:
        raise NotImplementedError

    def apply_layer(self, index: int, layer: nn.Module, h: Tensor | SparseBlock, layout: Layout,
                    stream: dict) -> Tensor:
        """``layer(h, layout)``; a model whose layers draw their own masks (GAT's attention dropout) reads the
        dropout ``stream`` (seed, epoch, training) of layer ``index`` here."""
        return layer(h, layout)

    def forward(self, x: Tensor | SparseFeatures, layout: Layout | Callable[[Tensor], Tensor], *,
                epoch: int = 0) -> Tensor:
        """x: dense (m, in_channels) or `SparseFeatures`; returns (m, out_channels): log-probabilities, or
        logits / values when `output` is ``identity``.

        ``layout``: a `Layout`, or a plain callable ``x -> M x`` (one process). ``epoch`` selects the
        dropout masks (ignored in eval mode).
        """
        layout = as_layout(layout, self.operator, x.shape[0])
        stream = {"seed": self.seed, "epoch": epoch, "training": self.training}
        h: Tensor | SparseBlock
        if isinstance(x, SparseFeatures):
            h = x.block(self.dropout, layer=0, **stream)
        else:
            rows, cols = input_ids(layout, self.layers[0].in_channels, x.device)
            h = dropout(x, self.dropout, layer=0, row_ids=rows, col_ids=cols, **stream)
        for index, layer in enumerate(self.layers):
            if index > 0:
                rows, cols = global_ids(layout, layer.in_channels, h.device)
                h = relu_dropout(h, self.dropout, layer=index, row_ids=rows, col_ids=cols, **stream)
            h = self.apply_layer(index, layer, h, layout, stream)
        out = layout.full_rows(h, self.layers[-1].out_channels)
        if self.output == "log_softmax":
            return F.log_softmax(out, dim=1)
        if self.target_scale is not None:
            scale, shift = self._target_affine(out)
            out = out * scale + shift
        return out

    def _target_affine(self, out: Tensor) -> tuple[Tensor, Tensor]:
        """`target_scale` and `target_shift` as tensors of ``out``'s dtype and device, made once per (dtype,
        device) rather than in every step."""
        key = (out.dtype, out.device)
        if self._affine_cache is None or self._affine_cache[0] != key:
            self._affine_cache = (key, torch.tensor(self.target_scale, dtype=out.dtype, device=out.device),
                                  torch.tensor(self.target_shift, dtype=out.dtype, device=out.device))
        return self._affine_cache[1], self._affine_cache[2]
