"""Resumable checkpoints: where they live (`naming`), saving and loading them atomically (`store`), the
manifest that verifies every file (`manifest`, with the history it records: `history_schema`), what run a
checkpoint belongs to (`fingerprint`), one run per folder (`lock`), reading DCP's files without running
code (`safe_reader`), one-line failures (`errors`), the run's checkpoint policy (`resume`) and starting from
a saved model instead (`init_from`).

Builds on `gridgnn.train.loop` (what a checkpoint holds is the loop's state); `store` is imported on first
use only, as it loads ``torch.distributed.checkpoint``.
"""
