"""Graphs, readers, generators and transforms (layer 4' of DESIGN.md §4)."""

from gridgnn.data.graph import Graph

__all__ = ["Graph"]
