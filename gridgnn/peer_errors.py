"""What a worker says when a peer died or stopped answering: one line, from one process (not collective).

A failed collective ends every surviving worker, and each would print its own copy of torch's text, which
embeds gloo's source paths (``[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534]``).
`collective_error_line` keeps what the user can act on and decides who prints it:

- started by ``gridgnn train --nprocs P`` (``launcher_speaks``: the worker entry `gridgnn.cli.worker` says
  so): nobody; the launcher, which sees which worker died or stopped, prints the run's one line;
- under torchrun: rank 0 only (torchrun itself reports a rank that died);
- a single process: itself.

The library's full text (torch's message and its chain) goes to the debug log: stderr, tagged with the rank,
when ``GRIDGNN_DEBUG=1``.
"""

from __future__ import annotations

import os
import re
import sys
import traceback

DEBUG_ENV = "GRIDGNN_DEBUG"
"""Set to 1 to have every process write the library's full error text to stderr (the debug log)."""

_SOURCE_PATH = re.compile(r"\[[^\[\]\s]*\.(?:cc|cpp|cu|h|hpp|c):\d+\]\s*")
"""A C++ source location as torch and gloo print them: ``[/path/to/file.cc:123]``."""


PEER_STOPPED = "another worker stopped or did not answer"
"""What every line about a lost or silent peer says (`peer_failure_text`, and the launcher's report)."""


def clean_text(text: str) -> str:
    """``text`` without C++ source locations, on one line (whitespace collapsed)."""
    return " ".join(_SOURCE_PATH.sub("", text).split())


def first_line(error: BaseException, limit: int | None = None) -> str:
    """The first non-blank line of ``error``'s text (its type name when there is none), cleaned by
    `clean_text`, cut to ``limit`` characters when given."""
    return clean_text((str(error).strip().splitlines() or [type(error).__name__])[0])[:limit]


def is_out_of_memory(error: BaseException) -> bool:
    """True for an allocation failure of this process: `MemoryError` (numpy, Python), torch's CPU allocator
    error, CUDA's out of memory. It is never a peer's fault, even inside a collective. Torch is not imported
    for this: an error of a module that was never imported cannot have been raised."""
    cuda_oom = getattr(sys.modules.get("torch.cuda"), "OutOfMemoryError", ())
    if isinstance(error, (MemoryError, cuda_oom)):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and ("can't allocate memory" in text or "not enough memory" in text
                                                or "Storage size calculation overflowed" in text)


def peer_failure_text(what: str, detail: str) -> str:
    """The one line for step ``what`` that failed because a peer died or stopped answering:
    ``"<what> failed: another worker stopped or did not answer in time (<detail>)"``. The only place that
    builds it (the counted collectives, control collectives and checkpoint steps all use it)."""
    return f"{what} failed: {PEER_STOPPED} in time ({detail})"


def debug_enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def debug_log(error: BaseException) -> None:
    """With ``GRIDGNN_DEBUG=1``: ``error`` with its cause chain and traceback on stderr, tagged with the rank."""
    if not debug_enabled():
        return
    rank = os.environ.get("RANK", "-")
    text = "".join(traceback.format_exception(error)).rstrip()
    print("\n".join(f"gridgnn debug [rank {rank}]: {line}" for line in text.splitlines()), file=sys.stderr)


def collective_error_line(error: BaseException, *, launcher_speaks: bool = False) -> str | None:
    """The one line to print for a failed collective, or None when another process reports this run: the
    local launcher (``launcher_speaks``, in its workers) or rank 0 (RANK, under torchrun).

    Collective on nothing: the decision uses only ``launcher_speaks`` and this process's RANK.
    """
    debug_log(error)
    if launcher_speaks or os.environ.get("RANK", "0") != "0":
        return None
    return first_line(error)
