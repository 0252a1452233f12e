"""The environment variables the local launcher (`gridgnn.cli.train_cmd.launch_workers`) sets for its workers,
in one place. Not collective.

Issue 14's frozen run spec is to replace these with one file the launcher writes; until then, every reader
and writer names them from here.
"""

PREPARED_ENV = "GRIDGNN_PREPARED_GRAPH"
"""Set by the local launcher: the folder of the graph it prepared once (`gridgnn.data.prepared`)."""
AUTO_REASON_ENV = "GRIDGNN_AUTO_REASON"
"""Set by the local launcher when it resolved ``--algo auto``: the one-line reason for the choice."""
LAUNCHER_PEAK_ENV = "GRIDGNN_LAUNCHER_PEAK_MEMORY"
"""Set by the local launcher: its peak resident memory (bytes) while preparing the graph."""
