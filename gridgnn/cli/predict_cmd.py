"""``gridgnn predict``: full-graph inference with a saved model on a dataset, in one process or on a grid.

The model comes from ``--save-model`` or a training checkpoint folder; the dataset may be the one it was
trained on or any other with the same feature width. The grid (any algorithm and process count) is
independent of the one it was trained on; the outputs are those of ``gridgnn train``
(`gridgnn.train.outputs.per_vertex`). Where the graph has labels, the accuracy of the split ``--eval-split``
names (default: all three) is printed and, with ``--metrics-out``, recorded (`gridgnn.train.loop.split_accuracy`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from gridgnn.cli.output_flags import add_memory_arguments, add_output_arguments, output_config
from gridgnn.config import ALGOS, TrainConfig
from gridgnn.errors import ConfigError
from gridgnn.run_spec import PREDICT_SPLITS, ProcessOptions, RunSpec


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``predict`` and its flags."""
    from gridgnn.cli.train_cmd import add_dataset_arguments

    parser = commands.add_parser("predict", help="predictions and embeddings of a saved model on a dataset",
                                 description="Full-graph inference with a model file (gridgnn train "
                                             "--save-model) or a checkpoint folder, on one process or a grid.")
    parser.add_argument("--model", required=True, metavar="FILE|DIR",
                        help="a model file (--save-model) or a checkpoint folder (epoch-NNNNNNNN)")
    add_dataset_arguments(parser)
    run = parser.add_argument_group("run")
    run.add_argument("--algo", choices=ALGOS, default="local",
                     help="aggregation algorithm, independent of the one used in training (default: local)")
    run.add_argument("--nprocs", type=int, default=1, help="local workers (under torchrun: its world size)")
    run.add_argument("--replication", type=int, default=1, help="1.5d replication factor c")
    run.add_argument("--grid", default=None, metavar="SHAPE", help="grid shape, as in gridgnn train")
    run.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                     help="limit on any one collective (default: %(default)s)")
    run.add_argument("--threads", type=int, default=None, help="compute threads per worker")
    run.add_argument("--quiet", action="store_true", help="print nothing but errors")
    run.add_argument("--metrics-out", metavar="FILE", default=None,
                     help="write the metric of --eval-split (JSON) to FILE")
    run.add_argument("--eval-split", choices=PREDICT_SPLITS, default="all",
                     help="the split whose accuracy is printed and recorded, where the graph has labels for it "
                          "(default: %(default)s)")
    add_output_arguments(parser, training=False)
    add_memory_arguments(parser)
    parser.set_defaults(handler=run_predict)


def predict_config(args: argparse.Namespace, kind: str, model_config: dict) -> TrainConfig:
    """The `TrainConfig` that describes this inference run (model kind, sizes and the kind's own options from
    the model file's ``model_config``: its class's ``options_from_file``)."""
    from gridgnn.nn.models import MODELS

    return TrainConfig(
        model=kind, **MODELS[kind].options_from_file(model_config),
        dataset=args.dataset, data_root=args.data_root, directed=args.directed,
        features=args.features, labels=args.labels, split=args.split, edge_features=args.edge_features,
        normalize_features=args.normalize_features, layers=int(model_config["num_layers"]),
        hidden=int(model_config["hidden_channels"]), order=str(model_config["order"]), epochs=1,
        seed=args.seed, algo=args.algo, nprocs=args.nprocs, replication=args.replication, grid=args.grid,
        reorder=_folder_order(args.dataset), quiet=args.quiet, progress=False, metrics_out=args.metrics_out,
        **output_config(args))


def _folder_order(dataset: str | None) -> str:
    """The vertex order of a prepared folder (`gridgnn prepare --reorder`), which inference keeps as it is (its
    outputs are in original ids either way); ``none`` for any other dataset."""
    from gridgnn.data.prepared import is_prepared, open_prepared

    return open_prepared(dataset).meta.get("reorder", "none") if dataset and is_prepared(dataset) else "none"


def run_predict(args: argparse.Namespace) -> int:
    """Handler of ``gridgnn predict``; returns 0 on success."""
    from gridgnn.cli.train_cmd import launch_workers
    from gridgnn.nn.export import kind_of
    from gridgnn.train.outputs.products import check_products
    from gridgnn.train.run.process_group import in_launched_worker

    if args.predictions_out is None and args.embeddings_out is None and args.metrics_out is None:
        raise ConfigError("nothing to write: give --predictions-out FILE, --embeddings-out FILE and/or "
                          "--metrics-out FILE")
    in_launched_worker()  # a hand-set torchrun environment that cannot work is refused first, as by train
    from gridgnn.train.run.inference import load_trained

    model, _ = load_trained(args.model)  # a bad model file fails here, before any worker starts
    kind = kind_of(model)
    config = predict_config(args, kind, model.file_config())
    check_products(config, reads={"--model": args.model})
    if config.metrics_out is not None:
        from gridgnn.train.outputs.metrics import check_writable

        check_writable(config.metrics_out)
    if config.algo != "local" and config.nprocs > 1 and not in_launched_worker():
        return launch_workers(config, args)
    if config.algo == "auto":
        config = dataclasses.replace(config, algo="1d" if in_launched_worker() else "local")
    if config.algo == "local":
        accuracies = _predict_local(config, model, args.model)
    else:
        accuracies = _predict_on_grid(config, model, args.model, ProcessOptions(args.timeout, args.threads))
    return _say_written(config, args.model, accuracies, args.eval_split)


def predict_spec(spec: RunSpec) -> int:
    """A worker of the local launcher: the inference of ``spec`` (which names the model file) on its grid."""
    from gridgnn.train.run.inference import load_trained

    model, _ = load_trained(spec.model_file)
    accuracies = _predict_on_grid(spec.config, model, spec.model_file, spec.process, spec)
    return _say_written(spec.config, spec.model_file, accuracies, spec.predict_split or "all")


def _say_written(config: TrainConfig, source: str, accuracies: dict, split: str) -> int:
    """Rank 0 writes the ``--metrics-out`` file (`prediction_metrics`) and prints the accuracy of ``split``
    (or of all three) and the files written (unless quiet); returns 0."""
    from gridgnn.train.loop.split_accuracy import accuracy_line

    if int(os.environ.get("RANK", "0")) != 0:
        return 0
    if split != "all":
        accuracies = {split: accuracies[split]}
    if config.metrics_out is not None:
        from gridgnn.train.outputs.metrics import write_metrics

        write_metrics(config.metrics_out, prediction_metrics(config, source, accuracies))
    if not config.quiet:
        print(accuracy_line(accuracies))
        for label, path in (("predictions", config.predictions_out), ("embeddings", config.embeddings_out),
                            ("metrics", config.metrics_out)):
            if path is not None:
                print(f"{label:<11} {path}")
    return 0


def prediction_metrics(config: TrainConfig, source: str, accuracies: dict) -> dict:
    """``gridgnn predict --metrics-out``'s document: ``{"command": "predict", "model", "dataset", "algo",
    "accuracy": {split: {"accuracy" (null when not measured), "correct", "vertices"[, "reason"]}}}`` with the
    split ``--eval-split`` names (all three by default), for a multiclass model; a multilabel or regression
    model's has ``"metric": {split: {"metric" (its name), "value", "vertices"[, "reason"]}}`` instead."""
    key = "metric" if any("metric" in entry for entry in accuracies.values()) else "accuracy"
    return {"command": "predict", "model": str(source), "dataset": config.dataset, "algo": config.algo,
            key: accuracies}


def _predict_local(config: TrainConfig, model, source: str) -> dict:
    """Inference in this process; returns the accuracy of each split
    (`gridgnn.train.loop.split_accuracy.split_accuracies`)."""
    from gridgnn.nn.export import check_fits
    from gridgnn.nn.models import operator_of
    from gridgnn.train.loop.split_accuracy import split_accuracies
    from gridgnn.train.outputs.products import write_vertex_outputs
    from gridgnn.train.run.inference import local_inputs
    from gridgnn.train.run.memory_guard import check_memory
    from gridgnn.train.run.training import load_graph

    graph = load_graph(config)
    check_fits(model, graph.num_features, f"model '{source}'")
    check_memory(config, graph, 1)
    features, agg = local_inputs(graph, operator_of(config.model))
    log_probs = write_vertex_outputs(model, features, agg, graph, predictions_out=config.predictions_out,
                                     embeddings_out=config.embeddings_out, embedding_layer=config.embedding_layer,
                                     infer_anyway=True)
    return split_accuracies(log_probs, graph, (0, graph.num_nodes), agg, model.task)


def _predict_on_grid(config: TrainConfig, model, source: str, process: ProcessOptions,
                     spec: RunSpec | None = None) -> dict:
    """One worker of a distributed inference (collective on the world); ``spec``: the run the local launcher
    resolved (its prepared graph and grid shape, used as given); without it (torchrun) the grid is validated
    here, once. Returns the accuracy of each split (every rank)."""
    import torch.distributed as dist

    from gridgnn.data.attach import NodeFiles, refuse_on_prepared
    from gridgnn.data.prepared import is_prepared, open_prepared
    from gridgnn.nn.export import check_fits
    from gridgnn.train.loop.split_accuracy import split_accuracies
    from gridgnn.train.outputs.products import write_vertex_outputs
    from gridgnn.train.run.inference import grid_inputs
    from gridgnn.train.run.memory_guard import check_memory
    from gridgnn.train.run.process_group import in_launched_worker, init_from_env
    from gridgnn.train.run.training import load_graph

    _, world = (init_from_env(process.timeout_s, process.interface, process.threads) if in_launched_worker()
                else (0, 1))
    prepared = (spec.prepared_graph if spec is not None else None) or \
        (config.dataset if is_prepared(config.dataset) else None)
    if prepared and spec is None:
        refuse_on_prepared(prepared, NodeFiles.of(config))
    graph = open_prepared(prepared) if prepared else load_graph(config)
    check_fits(model, graph.num_features, f"model '{source}'")
    if spec is None:  # torchrun: no launcher resolved the grid or checked the memory
        from gridgnn.train.run.resolve import grid_shape_for

        shape = grid_shape_for(config, world)
        check_memory(config, graph, world, shape=shape)
    else:
        shape = spec.shape
    features, ops = grid_inputs(config, graph, shape)
    log_probs = write_vertex_outputs(model.to(ops.grid.device), features, ops, graph,
                                     predictions_out=config.predictions_out, embeddings_out=config.embeddings_out,
                                     embedding_layer=config.embedding_layer, infer_anyway=True)
    accuracies = split_accuracies(log_probs, graph, ops.row_range, ops, model.task)
    if dist.is_initialized():
        dist.destroy_process_group()
    return accuracies
