"""The schema of the training history a checkpoint manifest records (``history``), checked before use.

``history = {"epochs": [record, ...], "best_epoch": int, "comm": null | [entry, ...]}`` where a record is
`gridgnn.train.loop.trainer.EpochRecord` as a dict (``epoch`` 1, 2, ... in order; ``loss``, accuracies, ``time_s``
and ``lr`` numbers: NaN and infinities come back from the manifest's ``nonfinite`` list; the accuracies null
together in an epoch ``--eval-every`` skipped; ``lr`` absent or null in older checkpoints), ``best_epoch`` (0
only before any evaluation), ``early_stop`` and ``lr_schedule`` (`gridgnn.train.checkpoint.resume.loop_state`; absent in
older checkpoints) and each ``comm``
entry, one per epoch, is null (an epoch of a local run) or the merged communication of one epoch of a
distributed run (`gridgnn.train.run.grid_train.merge_epoch_comm`): per-rank lists of ``bytes``, ``calls``,
``eval_bytes``, ``gather_bytes`` and ``peak_memory_bytes``, per-phase objects of such lists, and the three times.
`history_problem` names the first thing wrong, or returns None. Not collective.
"""

from __future__ import annotations

from gridgnn.grid.comm_records import PHASES

REQUIRED_KEYS = ("epoch", "loss", "time_s")
SPLIT_KEY_SETS = (("train_acc", "val_acc", "test_acc"), ("train_metric", "val_metric", "test_metric"))
"""Each set is present whole or absent (a record has at least one); its values are numbers, or all null for an
epoch ``--eval-every`` did not evaluate."""
OPTIONAL_RECORD_KEYS = ("lr",)
"""Record keys older checkpoints lack: ``lr`` (a number; null where unknown)."""
_RANK_LISTS = ("bytes", "calls")
_OPTIONAL_RANK_LISTS = ("eval_bytes", "gather_bytes", "peak_memory_bytes")
_PHASE_TABLES = ("by_phase", "calls_by_phase")
_TIMES = ("comm_time_s", "exposed_comm_time_s", "compute_time_s")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def history_problem(history: object, epochs: int) -> str | None:
    """What is wrong with ``history`` of a checkpoint taken after ``epochs`` epochs, or None."""
    if not isinstance(history, dict) or not isinstance(history.get("epochs"), list):
        return "history"
    records = history["epochs"]
    if len(records) != epochs:
        return f"history holds {len(records)} epochs, not {epochs}"
    for index, record in enumerate(records, start=1):
        if not _record_ok(record, index):
            return f"epoch record {index}"
    best = history.get("best_epoch")
    evaluated = any(_validation(record) is not None for record in records)
    if isinstance(best, bool) or not isinstance(best, int) or not (1 if evaluated else 0) <= best <= epochs \
            or (best and _validation(records[best - 1]) is None):
        return "history best_epoch"
    for key in ("early_stop", "lr_schedule"):  # absent from older checkpoints; checked in full where loaded
        if history.get(key) is not None and not isinstance(history[key], dict):
            return f"history {key}"
    comm = history.get("comm")
    if comm is None:
        return None
    if not isinstance(comm, list) or len(comm) != epochs:
        return f"communication history: expected a list of {epochs} entries"
    for index, entry in enumerate(comm, start=1):
        if entry is not None and not _comm_entry_ok(entry):
            return f"communication history of epoch {index}"
    return None


def _validation(record: dict) -> object:
    """An epoch record's validation value: its accuracy (multiclass) or, for a task scored by another metric
    (a regression's records hold only the metric keys), its metric."""
    return record["val_acc"] if "val_acc" in record else record.get("val_metric")


def _record_ok(record: object, epoch: int) -> bool:
    """Whether ``record`` is epoch ``epoch``'s record: the required keys, whole split-key sets, nothing else."""
    if not isinstance(record, dict) or record.get("epoch") != epoch:
        return False
    present = [keys for keys in SPLIT_KEY_SETS if any(key in record for key in keys)]
    allowed = set(REQUIRED_KEYS).union(*present)
    if not present or not allowed <= set(record) or not set(record) <= allowed | set(OPTIONAL_RECORD_KEYS):
        return False
    sets_ok = all(all(record[key] is None for key in keys) or all(_number(record[key]) for key in keys)
                  for keys in present)  # an epoch --eval-every skipped: all null
    return (sets_ok and all(_number(record[key]) for key in REQUIRED_KEYS[1:])
            and (record.get("lr") is None or _number(record["lr"])))


def _comm_entry_ok(entry: object) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("bytes"), list) or not entry["bytes"]:
        return False
    world = len(entry["bytes"])

    def rank_list(value: object) -> bool:
        return isinstance(value, list) and len(value) == world and all(_count(v) for v in value)

    tables_ok = all(isinstance(entry.get(key), dict) and set(entry[key]) == set(PHASES)
                    and all(rank_list(v) for v in entry[key].values()) for key in _PHASE_TABLES)
    return (all(rank_list(entry.get(key)) for key in _RANK_LISTS) and tables_ok
            and all(key not in entry or rank_list(entry[key]) for key in _OPTIONAL_RANK_LISTS)
            and all(_number(entry.get(key)) for key in _TIMES)
            and _rank_times_ok(entry.get("rank_times_s"), world))


def _rank_times_ok(value: object, world: int) -> bool:
    """``rank_times_s`` is optional (older checkpoints lack it): else lists of ``world`` numbers."""
    if value is None:
        return True
    return isinstance(value, dict) and all(
        isinstance(times, list) and len(times) == world and all(_number(t) for t in times)
        for times in value.values())
