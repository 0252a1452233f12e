"""The `gridgnn` command line."""
