"""What this machine and the libraries can represent: the bounds every size and count is checked against
before anything is allocated (layer 0 of docs/architecture.md §4; pure code, not collective).

A count beyond these is refused with one line (`ConfigError` or `DataError`, exit status 2) instead of an
overflow deep inside torch or numpy, a process killed for memory, or a worker dying of SIGSEGV.
"""

from __future__ import annotations

import math
import os

from gridgnn.errors import ConfigError

MAX_THREADS = 1024
"""The most compute threads per worker (``--threads``): torch's thread pool crashes (SIGSEGV) near 10^5."""
MIN_TIMEOUT_S = 1.0
"""The shortest ``--timeout``: joining the process group alone takes about that long."""
MAX_TIMEOUT_S = 7 * 24 * 3600.0
"""The longest ``--timeout`` (one week): torch keeps timeouts in milliseconds and overflows far beyond."""
MAX_PLAN_PROCS = 16384
"""The most processes ``gridgnn plan`` plans for: its per-rank tables grow with P² (2 GiB at this bound)."""
MAX_LAYERS = 1024
"""The most GCN layers (``--layers``): each is a module of its own, built and stepped one by one."""
MAX_CLASSES = 1 << 24
"""The most classes a graph may have (labels and ``num_classes``); far beyond any dataset's."""
MAX_TENSOR_ELEMENTS = 1 << 59
"""The most elements of one tensor: ``elements x 8 bytes`` must stay below 2^63 (torch's storage size)."""
MAX_PLAN_PRODUCT = 1 << 58
"""The largest product of a vertex or edge count with a width that `gridgnn plan` accepts: its byte counts
(x 8 bytes at most, summed over a few terms) stay within numpy's int64."""
MAX_MEMORY_BYTES = (1 << 63) - 1
"""The largest memory size (``--memory-per-proc``): byte counts are int64 in the cost model and in torch."""
FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32: the weights, their updates and the scalars torch multiplies them by."""
MAX_LR = FLOAT32_MAX * (1 - 0.9)
"""The largest learning rate: Adam's first step is ``lr / (1 - β1)`` (β1 = 0.9), a scalar torch converts to
float32 (beyond it torch raises an overflow error; below it a too-large rate diverges, see
`gridgnn.train.loop.nonfinite`)."""
BYTES_PER_PARAMETER = 16
"""float32 weight, gradient and Adam's two moments."""


def machine_memory_bytes() -> int | None:
    """This machine's physical memory in bytes, or None where the system does not tell."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def human_bytes(value: float) -> str:
    """``value`` bytes as B, KiB, ... EiB with one decimal."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024:
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{value:.1f} EiB"


def check_threads(threads: int | None) -> None:
    """``--threads`` in [1, MAX_THREADS] (`ConfigError`)."""
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        raise ConfigError(f"argument --threads: must be between 1 and {MAX_THREADS} threads per worker, "
                          f"got {threads}")


def check_timeout(timeout_s: float | None) -> None:
    """``--timeout`` a finite number of seconds in [MIN_TIMEOUT_S, MAX_TIMEOUT_S] (`ConfigError`)."""
    if timeout_s is not None and not MIN_TIMEOUT_S <= timeout_s <= MAX_TIMEOUT_S:  # NaN fails too
        raise ConfigError(f"argument --timeout: must be a positive number of seconds between {MIN_TIMEOUT_S:g} "
                          f"and {MAX_TIMEOUT_S:g} (one week), got {timeout_s:g}")


def check_log_every(seconds: float | None) -> None:
    """``--log-every`` a finite number of seconds, 0 or more (`ConfigError`)."""
    if seconds is not None and not 0 <= seconds < math.inf:  # NaN fails too
        raise ConfigError(f"argument --log-every: must be a number of seconds, 0 or more, got {seconds:g}")


def check_hidden_width(hidden: int, layers: int) -> None:
    """Refuse (`ConfigError`) a ``hidden`` width whose weight matrices fit in no tensor or in this machine's
    memory whatever the dataset: with ``layers >= 3`` a ``hidden x hidden`` matrix, with 2 layers at least a
    ``1 x hidden`` one (one input feature); 1 layer has no hidden width. Checked with the configuration,
    before any dataset is read; `check_weight_matrix` checks the real widths once they are known."""
    if layers >= 2:
        check_weight_matrix(hidden if layers >= 3 else 1, hidden, "hidden weight matrix (at least, whatever "
                            "the dataset)", f"lower --hidden (now {hidden})")


def check_weight_matrix(rows: int, cols: int, what: str, fix: str) -> None:
    """Refuse (`ConfigError`) a ``rows x cols`` float32 parameter that no tensor or this machine's memory
    can hold (with its gradient and Adam state), before torch tries; ``what`` names it, ``fix`` the remedy."""
    elements = rows * cols
    needed = elements * BYTES_PER_PARAMETER
    memory = machine_memory_bytes()
    if elements > MAX_TENSOR_ELEMENTS or (memory is not None and needed > memory):
        where = f"this machine's {human_bytes(memory)}" if memory is not None else "any machine's memory"
        raise ConfigError(f"not enough memory for the model: the {rows} x {cols} {what} needs {human_bytes(needed)} "
                          f"with its gradient and optimizer state, more than {where}; {fix}")


def oversized_product(num_nodes: int, num_entries: int, widths: dict[str, int]) -> str | None:
    """The first product of ``num_nodes`` or ``num_entries`` (stored entries of Â) with a width (``--hidden``,
    features, classes: ``widths`` by name) beyond `MAX_PLAN_PRODUCT`, in words (``"N vertices x --hidden W"``),
    or None when the cost model's int64 byte counts hold them all."""
    for name, width in widths.items():
        for what, count in (("vertices", num_nodes), ("adjacency entries", num_entries)):
            if count * width > MAX_PLAN_PRODUCT:
                return f"{count} {what} x {name} {width}"
    return None


def check_plan_sizes(num_nodes: int, num_entries: int, widths: dict[str, int]) -> None:
    """Refuse (`ConfigError`) counts whose products with a width the cost model's int64 byte counts cannot
    hold (`oversized_product`)."""
    product = oversized_product(num_nodes, num_entries, widths)
    if product is not None:
        raise ConfigError(f"{product} is beyond what the cost model counts (at most {MAX_PLAN_PRODUCT} = 2^58 "
                          "elements); plan a smaller graph or width")


MAX_INFLATION = 200
"""The most a compressed zip member (``.npz``, a model file) may inflate, as declared size / stored size:
numeric arrays deflate far less; a "zip bomb" reaches about 1,000."""
SMALL_MEMBER_BYTES = 16 << 20
"""Members that inflate to at most this many bytes are not held to `MAX_INFLATION` (they cost nothing)."""


def zip_inflation_problem(archive) -> str | None:
    """What is wrong with the sizes a zip archive (a `zipfile.ZipFile`) declares, in words, or None: a member
    inflating beyond `MAX_INFLATION` times its stored size, or members declaring more bytes in all than this
    machine's memory. Reads the central directory only, so it runs before anything is inflated."""
    total = 0
    for member in archive.infolist():
        total += member.file_size
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > SMALL_MEMBER_BYTES and ratio > MAX_INFLATION:
            return (f"member '{member.filename}' would inflate {ratio:.0f}x (from {human_bytes(member.compress_size)}"
                    f" to {human_bytes(member.file_size)}), beyond the {MAX_INFLATION}x arrays reach")
    memory = machine_memory_bytes()
    if memory is not None and total > memory:
        return f"its members declare {human_bytes(total)} in all, more than this machine's {human_bytes(memory)}"
    return None
