"""Distributed versions of the dense parts of an epoch: products with W, loss, metrics (layer 4)."""
