"""`gridgnn` command line: subcommands ``train``, ``info``, ``prepare``, ``plan``, ``calibrate``, ``report``
(docs/architecture.md §4, layer 7).

Every error the user can fix (`GridGNNError`, a bad flag, an unreadable or unwritable path) ends the
command with one line ``gridgnn: error: ...`` on stderr and exit status 2, never a traceback.

Only what builds the parser is imported here (no torch, numpy or scipy): ``--version``, ``--help``, ``info``
and ``plan`` on statistics start fast, and each handler imports what its command needs when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from gridgnn import __version__
from gridgnn.cli import calibrate_cmd, info_cmd, netcheck_cmd, plan_cmd, predict_cmd, prepare_cmd, report_cmd, train_cmd
from gridgnn.errors import CollectiveError, GridGNNError
from gridgnn.limits import check_log_every, check_threads, check_timeout
from gridgnn.peer_errors import collective_error_line, is_out_of_memory

EXIT_USAGE = 2
EXIT_PEER_FAILED = 3
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a process killed by a closed pipe
POOL_PROCESSES = 8
"""The most processes that read a large prepared folder's row blocks for the planner (`run`)."""


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
    predict_cmd.add_parser(commands)
    info_cmd.add_parser(commands)
    prepare_cmd.add_parser(commands)
    plan_cmd.add_parser(commands)
    calibrate_cmd.add_parser(commands)
    netcheck_cmd.add_parser(commands)
    report_cmd.add_parser(commands)
    return parser


def check_run_flags(args: argparse.Namespace) -> None:
    """Reject a ``--timeout`` or ``--threads`` outside what the machine and torch can take (`ConfigError`;
    bounds in `gridgnn.limits`), whatever the algorithm, so that a bad value fails before any work instead
    of being ignored or reaching a worker."""
    check_timeout(getattr(args, "timeout", None))
    check_threads(getattr(args, "threads", None))
    check_log_every(getattr(args, "log_every", None))


COMMANDS = ("train", "info", "prepare", "plan", "calibrate", "report")


def _torch_error(error: BaseException, name: str) -> bool:
    """True when ``error`` is torch's ``name`` (``distributed.DistError``, ``cuda.OutOfMemoryError``); torch is
    not imported for this: an error of a module that was never imported cannot have been raised."""
    module, _, cls = f"torch.{name}".rpartition(".")
    owner = sys.modules.get(module)
    return owner is not None and isinstance(error, getattr(owner, cls, ()))


def _out_of_memory(error: BaseException) -> bool:
    """True for allocation failures (`gridgnn.peer_errors.is_out_of_memory`)."""
    return is_out_of_memory(error)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if isinstance(error, OSError) and error.filename is not None and str(error.filename) not in text:
        text = f"{error.filename}: {text}"
    return text or type(error).__name__


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def standard_streams() -> None:
    """A standard stream the caller closed (``gridgnn train ... >&-``) is opened onto /dev/null: Python then
    has no ``sys.stdout`` at all, and the next file opened would take descriptor 1, where torch's and gloo's
    C++ code (and the workers, which inherit it) would write. Output so closed is discarded."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            reopened = False
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: ``fd`` itself
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            reopened = True
        if getattr(sys, name) is None:  # closed at start; a descriptor open now is someone else's file
            setattr(sys, name, open(fd if reopened else os.devnull, "w" if fd else "r", encoding="utf-8",
                                    closefd=not reopened))


def printable_output() -> None:
    """Names that are not valid in the terminal's encoding (a file name in another encoding reaches Python
    as lone surrogates) print as backslash escapes instead of raising UnicodeEncodeError; closed standard
    streams are opened onto /dev/null first (`standard_streams`)."""
    standard_streams()
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    printable_output()
    parser = build_parser()
    return guarded(lambda: _dispatch(parser, list(sys.argv[1:] if argv is None else argv)))


def _dispatch(parser: ArgumentParser, argv: list[str]) -> int:
    args = parser.parse_args(argv)
    if args.command is None:
        raise UsageError(f"choose a command: {', '.join(COMMANDS)} (see 'gridgnn --help')")
    check_run_flags(args)
    return args.handler(args)


def guarded(work: Callable[[], int], *, launcher_speaks: bool = False) -> int:
    """``work()``'s exit status, every error the user can act on turned into one line and a status (see the
    module docstring): 2 for bad input, 3 for a lost peer, 141 for a closed stdout, 130 for Ctrl-C.
    ``launcher_speaks``: in a worker of the local launcher, which prints a lost peer's line itself."""
    try:
        return work()
    except SystemExit as done:  # --help and --version
        return done.code if isinstance(done.code, int) else 0
    except BrokenPipeError:  # stdout closed early (e.g. piped into head): stop quietly, as SIGPIPE would
        _silence_stdout()
        if "WORLD_SIZE" in os.environ:  # a worker: exit now, not in the destructors of a live process group
            sys.stderr.flush()
            os._exit(EXIT_BROKEN_PIPE)
        return EXIT_BROKEN_PIPE
    except (GridGNNError, OSError) as error:
        _say_error(_one_line(error))
        return EXIT_USAGE
    except (MemoryError, RuntimeError) as error:  # CollectiveError and torch's DistError are RuntimeErrors
        if isinstance(error, CollectiveError) or _torch_error(error, "distributed.DistError"):
            return _peer_failed(error, launcher_speaks)
        if not _out_of_memory(error):
            raise
        # sizes too large for this machine (--hidden, a generator spec, a declared node count): one line
        print(f"gridgnn: error: not enough memory: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gridgnn: interrupted", file=sys.stderr)
        return 130


def _say_error(line: str) -> None:
    """Print the run's one error line; a stderr that cannot be written (closed, or a read-only file in its
    place) loses the line, not the exit status."""
    try:
        print(f"gridgnn: error: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _peer_failed(error: BaseException, launcher_speaks: bool = False) -> int:
    """A peer died or stopped answering: one line from one process (`collective_error_line`), the library's
    full text only in the debug log; a worker skips the destructors of the broken process group, which may
    abort the process instead of letting it exit with our status."""
    line = collective_error_line(error, launcher_speaks=launcher_speaks)
    if line is not None:
        print(f"gridgnn: error: {line}", file=sys.stderr)
    if "WORLD_SIZE" not in os.environ:
        return EXIT_PEER_FAILED
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_PEER_FAILED)


def run() -> None:
    """The console script and ``python -m gridgnn``: `main`, then exit at once with its status.

    Once torch is loaded, the interpreter's own shutdown (unloading torch's modules and C++ libraries) takes
    one to several seconds per process after the last line is printed; everything of ours is closed by then
    (files written and renamed, temporary folders removed, workers reaped), so the streams are flushed and
    the process ends without it. Without torch (``--help``, ``info``, ``plan``) the ordinary exit is kept.
    Here (not in `main`, which a program may call) the statistics of a large prepared folder may use a pool
    of processes (`gridgnn.cost.block_stats.enable_pool`).
    """
    from gridgnn.cost.block_stats import enable_pool

    enable_pool(min(os.cpu_count() or 1, POOL_PROCESSES))
    exit_now(main())


def exit_now(status: int) -> None:
    """End this process with ``status`` (see `run`): at once when torch is loaded."""
    if "torch" not in sys.modules:
        sys.exit(status)
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # stdout closed meanwhile: nothing more can reach it
        pass
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
