"""``--log-csv FILE``: one row per epoch, for pandas or a spreadsheet (``pandas.read_csv(FILE)``).

Columns (`columns`), one header row, then one row per epoch of the metrics document, in order::

    epoch,loss,train_<metric>,val_<metric>,test_<metric>,time_s,bytes,lr

where ``<metric>`` is the run's ``--metric`` (``train_accuracy``, ``val_rocauc``, ``test_mse``, ...).
``epoch``..``time_s`` are the metrics file's epoch records (``train_metric``...; an epoch ``--eval-every`` did not
evaluate has empty metric cells, which pandas reads as NaN; a non-finite loss reads ``nan`` or ``inf``). ``bytes``
is the whole grid's traffic of the training step: the bytes every rank received in it, summed over the ranks (the
metrics file's ``comm.bytes`` list, summed); 0 for an epoch that ran in one process. ``lr`` is the learning rate the
step used (empty in epochs of a checkpoint written before it was recorded). Floats are written as Python's shortest
exact form, so each cell reads back to the metrics file's number.

Rank 0 writes the file once training has ended, from the metrics document, through
`gridgnn.safe_files.atomic_write` (a hidden partial renamed into place: never a half-written file under the
name); `check_log_csv` refuses a bad path before any work, as for the other outputs. Not collective.
"""

from __future__ import annotations

import csv
import io
import os

from gridgnn.safe_files import atomic_write, check_target

WHAT = "--log-csv file"


def columns(metric: str) -> tuple[str, ...]:
    """The header of a run scored by ``metric``."""
    return ("epoch", "loss", f"train_{metric}", f"val_{metric}", f"test_{metric}", "time_s", "bytes", "lr")


def check_log_csv(path: str | os.PathLike) -> None:
    """Raise `ConfigError` (one line naming ``--log-csv``) when ``path`` is a folder, FIFO, device, link or
    socket, or its folder is missing or not writable. Not collective."""
    from gridgnn.train.outputs.metrics import check_writable

    check_target(path, WHAT)
    check_writable(str(path), WHAT)


def epoch_rows(metrics: dict) -> list[list]:
    """The rows (without the header) of the metrics document ``metrics``: one per epoch, `columns` in order,
    None for an empty cell."""
    rows = []
    for epoch in metrics["epochs"]:
        comm = epoch.get("comm")
        step_bytes = sum(comm["bytes"]) if isinstance(comm, dict) else 0
        values = [epoch.get(f"{split}_metric", epoch.get(f"{split}_acc")) for split in ("train", "val", "test")]
        rows.append([epoch["epoch"], epoch["loss"], *values, epoch["time_s"], step_bytes, epoch.get("lr")])
    return rows


def write_epoch_csv(path: str | os.PathLike, metrics: dict) -> None:
    """Write `columns` and `epoch_rows` to ``path`` atomically; a failed write is one `ConfigError`."""
    text = io.StringIO(newline="")
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(columns(metrics["final"].get("metric", "accuracy")))
    writer.writerows([["" if cell is None else cell for cell in row] for row in epoch_rows(metrics)])
    with atomic_write(path, WHAT) as stream:
        stream.write(text.getvalue().encode("utf-8"))
