"""gridgnn: full-graph GNN training over 1D, 1.5D, 2D and 3D process grids."""

__version__ = "0.1.0"
