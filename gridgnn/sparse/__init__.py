"""Local sparse kernels: the only place that multiplies a sparse block by a dense matrix."""

from gridgnn.sparse.csr import SparseBlock, index_dtype_for

__all__ = ["SparseBlock", "index_dtype_for"]
