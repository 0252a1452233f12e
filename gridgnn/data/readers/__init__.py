"""Format readers. Each turns one on-disk format into a `Graph`; bad input raises a one-line `DataError`.

Import the reader modules directly (``from gridgnn.data.readers.planetoid import read_planetoid``);
`gridgnn.data.registry.load_dataset` detects the format and dispatches.
"""
