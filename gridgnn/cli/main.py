"""`gridgnn` command line: subcommands ``train`` and ``info`` (DESIGN.md §4, layer 7).

Every error the user can fix (`GridGNNError`, a bad flag, an unreadable or unwritable path) ends the
command with one line ``gridgnn: error: ...`` on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence

import torch
from torch.distributed import DistError

from gridgnn import __version__
from gridgnn.cli import calibrate_cmd, info_cmd, netcheck_cmd, plan_cmd, prepare_cmd, train_cmd
from gridgnn.errors import CollectiveError, GridGNNError

EXIT_USAGE = 2
EXIT_PEER_FAILED = 3
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a process killed by a closed pipe


class UsageError(GridGNNError):
    """A command-line flag or argument is wrong (raised instead of argparse's exit)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises `UsageError` instead of printing the usage block and exiting."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise UsageError(message)


def build_parser() -> ArgumentParser:
    """The top-level parser with its subcommands; each subcommand sets ``handler(args) -> int``."""
    parser = ArgumentParser(
        prog="gridgnn",
        description="Full-graph GNN training over 1D, 1.5D, 2D and 3D process grids.",
    )
    parser.add_argument("--version", action="version", version=f"gridgnn {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    train_cmd.add_parser(commands)
    info_cmd.add_parser(commands)
    prepare_cmd.add_parser(commands)
    plan_cmd.add_parser(commands)
    calibrate_cmd.add_parser(commands)
    netcheck_cmd.add_parser(commands)
    return parser


def check_run_flags(args: argparse.Namespace) -> None:
    """Reject zero, negative or non-finite ``--timeout`` and ``--threads`` below 1 (`UsageError`), whatever
    the algorithm, so that a bad value fails before any work instead of being ignored or reaching a worker."""
    timeout = getattr(args, "timeout", None)
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"argument --timeout: must be a positive number of seconds, got {timeout:g}")
    threads = getattr(args, "threads", None)
    if threads is not None and threads < 1:
        raise UsageError(f"argument --threads: must be at least 1, got {threads}")


def _out_of_memory(error: BaseException) -> bool:
    """True for allocation failures: `MemoryError` (numpy, Python) and torch's CPU allocator error."""
    return isinstance(error, (MemoryError, torch.cuda.OutOfMemoryError)) or (
        isinstance(error, RuntimeError) and "can't allocate memory" in str(error)
    )


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if isinstance(error, OSError) and error.filename is not None and str(error.filename) not in text:
        text = f"{error.filename}: {text}"
    return text or type(error).__name__


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
        args.argv = argv  # the local launcher hands the same arguments to its workers
        if args.command is None:
            raise UsageError("choose a command: train or info (see 'gridgnn --help')")
        check_run_flags(args)
        return args.handler(args)
    except SystemExit as done:  # --help and --version
        return done.code if isinstance(done.code, int) else 0
    except BrokenPipeError:  # stdout closed early (e.g. piped into head): stop quietly, as SIGPIPE would
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except (GridGNNError, OSError) as error:
        print(f"gridgnn: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except (CollectiveError, DistError) as error:  # a peer died or stopped answering: one line
        text = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"gridgnn: error: {text}", file=sys.stderr)
        if "WORLD_SIZE" in os.environ:  # a worker: skip the destructors of the broken process group,
            sys.stdout.flush()  # which may abort the process instead of letting it exit with our status
            sys.stderr.flush()
            os._exit(EXIT_PEER_FAILED)
        return EXIT_PEER_FAILED
    except (MemoryError, RuntimeError) as error:  # after DistError and CollectiveError, RuntimeErrors too
        if not _out_of_memory(error):
            raise
        # sizes too large for this machine (--hidden, a generator spec, a declared node count): one line
        print(f"gridgnn: error: not enough memory: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gridgnn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
