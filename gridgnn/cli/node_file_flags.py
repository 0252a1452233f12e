"""The flags that attach node data from files to any dataset (``train``, ``info``, ``plan``, ``prepare``,
``predict``); what they do is `gridgnn.data.attach`."""

from __future__ import annotations


def add_node_file_arguments(group) -> None:
    """``--features FILE``, ``--labels FILE``, ``--split DIR``, ``--edge-features FILE``: node and edge data
    attached to any graph source (`gridgnn.data.attach`)."""
    group.add_argument("--features", metavar="FILE", default=None,
                       help="node features (n, f) from a .npy, or a .npz (one array or a scipy sparse matrix), "
                            "in place of the dataset's")
    group.add_argument("--labels", metavar="FILE", default=None,
                       help="node labels from a .npy ((n,) or (n, T)) or .csv (one row per vertex; empty, NaN or "
                            "-1: unlabelled); the task is inferred from them")
    group.add_argument("--split", metavar="DIR", default=None,
                       help="folder of train/valid/test index files (.npy, .csv(.gz), .txt) (default: the "
                            "dataset's split; with --labels, a drawn split is drawn again among labelled vertices)")
    group.add_argument("--edge-features", metavar="FILE", default=None,
                       help="edge features (E, d) from a .npy, one row per edge in the source's edge order (an edge "
                            "list's lines; else by target, then source), in place of the dataset's")
