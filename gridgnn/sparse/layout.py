"""Byte sizes of the packed sparse layouts (pure; shared by the kernels and the cost model). Not collective."""


def packed_nbytes(rows: int, nnz: int, index_size: int, value_size: int) -> int:
    """Bytes of a packed CSR block with ``rows`` rows and ``nnz`` stored values (sizes in bytes)."""
    return (rows + 1 + nnz) * index_size + nnz * value_size
