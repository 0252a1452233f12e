"""The training loop of one process or one rank: the `Trainer` (construction, step, evaluation) and what it
uses per epoch: the validation judge (early stopping, best epoch), the learning-rate schedule, the task and its
metric, the `DistributedTrainer` that runs the same loop on a rank's blocks of a grid, and how the non-finite
losses of a run that diverges are kept in the JSON documents that record its epochs (`nonfinite`).

Imports nothing else of `gridgnn.train`: every other room builds on this one.
"""
