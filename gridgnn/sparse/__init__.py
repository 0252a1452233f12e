"""Local sparse kernels: the only place that multiplies a sparse block by a dense matrix.

`SparseBlock` and `index_dtype_for` (torch) are loaded on first use, so that the pure helpers of this package
(`gridgnn.sparse.cut`, `gridgnn.sparse.layout`, and `gridgnn.sparse.adjacency`, the one place Â is normalized),
which the planner and the cost model use, do not import torch.
"""

__all__ = ["SparseBlock", "index_dtype_for"]


def __getattr__(name: str):
    if name in __all__:
        from gridgnn.sparse import csr

        return getattr(csr, name)
    raise AttributeError(f"module 'gridgnn.sparse' has no attribute {name!r}")
