"""Starting worker processes on one machine (tests and `gridgnn train --nprocs`)."""
