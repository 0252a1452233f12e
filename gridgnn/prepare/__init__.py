"""Distributed preparation (``gridgnn prepare SOURCE --out DIR --nprocs P``): every process reads its part of
the input, edges are exchanged to the owners of their rows, and each process writes its shard of the folder
(`gridgnn.data.row_shards`); no process holds the whole graph. `gridgnn.prepare.pipeline` is the per-process
pipeline, `gridgnn.prepare.launch` starts it."""
