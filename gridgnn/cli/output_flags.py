"""Flags shared by ``train`` and ``predict``: the per-vertex outputs and the memory guard."""

from __future__ import annotations

import argparse

from gridgnn.config import WEIGHTS


def add_output_arguments(parser: argparse.ArgumentParser, *, training: bool) -> None:
    """``--predictions-out``, ``--embeddings-out``, ``--embedding-layer`` (and for training ``--save-model``,
    ``--weights``)."""
    out = parser.add_argument_group("outputs (.npy for programs, .csv for spreadsheets; original vertex ids)")
    out.add_argument("--predictions-out", metavar="FILE", default=None,
                     help="per vertex: node id, predicted class and class probabilities")
    out.add_argument("--embeddings-out", metavar="FILE", default=None,
                     help="per vertex: the output of layer --embedding-layer (after its ReLU)")
    out.add_argument("--embedding-layer", type=int, metavar="K", default=None,
                     help="layer whose output --embeddings-out writes, 1 = first (default: the last hidden "
                          "layer; the last layer gives the logits)")
    if training:
        out.add_argument("--save-model", metavar="FILE", default=None,
                         help="write the weights and model configuration (torch.save, loads with "
                              "weights_only=True; see docs/model-files.md)")
        out.add_argument("--weights", choices=WEIGHTS, default="best",
                         help="which epoch's weights the outputs and --save-model use: best validation "
                              "accuracy or last (default: %(default)s)")


def add_memory_arguments(parser: argparse.ArgumentParser) -> None:
    """``--memory-per-proc`` and ``--no-memory-check``."""
    from gridgnn.cli.plan_cmd import parse_size

    guard = parser.add_argument_group("memory guard")
    guard.add_argument("--memory-per-proc", type=parse_size, default=None, metavar="SIZE",
                       help="memory each process may use, e.g. 16GiB (default: free device memory on GPU, "
                            "available host memory / processes on CPU)")
    guard.add_argument("--no-memory-check", dest="memory_check", action="store_false",
                       help="start even when the predicted memory per process exceeds what is available")


def output_config(args: argparse.Namespace) -> dict:
    """The `TrainConfig` fields of these flags."""
    return {"predictions_out": args.predictions_out, "embeddings_out": args.embeddings_out,
            "embedding_layer": args.embedding_layer, "save_model": getattr(args, "save_model", None),
            "weights": getattr(args, "weights", "best"), "memory_per_proc": args.memory_per_proc,
            "memory_check": args.memory_check}
