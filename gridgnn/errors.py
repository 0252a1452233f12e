"""User-facing errors.

Anything the user can fix (a bad file, a bad flag, a grid that does not fit) raises a subclass of
`GridGNNError`. The command line turns it into one line on stderr and exit status 2; everything else is a bug
and keeps its traceback.
"""


class GridGNNError(Exception):
    """An error caused by the user's input; its message is one self-contained line."""


class DataError(GridGNNError):
    """A dataset file or folder is missing, truncated, malformed or inconsistent."""


class ConfigError(GridGNNError):
    """A configuration value (flag, grid shape, process count) is invalid."""


class CheckpointError(GridGNNError):
    """A checkpoint is damaged, tampered with, or belongs to another model or dataset."""


class CollectiveError(RuntimeError):
    """A collective failed: a peer process died, stopped answering within the timeout, or the network broke.

    Not the user's input: the command line prints one line and exits with status 3.
    """
