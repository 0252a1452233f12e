"""`PackedPanel`: a sparse panel kept as byte buffers ready to broadcast, in both orientations.

2D and 3D move Â panels between processes. The owner keeps each panel packed once (forward ``A`` and
backward ``Aᵀ``) and computes on `SparseBlock` views into those buffers, so a stage neither copies nor
converts anything before sending.
"""

from __future__ import annotations

import scipy.sparse as sp
import torch

from gridgnn.sparse.csr import PackedLayout, SparseBlock


class PackedPanel:
    """One owned panel ``A`` (rows x cols): packed buffers plus CSR views for ``A`` and ``Aᵀ``."""

    def __init__(self, matrix: sp.spmatrix, *, index_dtype: torch.dtype, dtype: torch.dtype,
                 device: torch.device | str):
        block = SparseBlock.from_scipy(matrix, index_dtype=index_dtype, dtype=dtype, device=device)
        self._buffers = {False: block.pack(), True: block.transposed().pack()}
        self._layouts = {False: block.layout(), True: block.transposed().layout()}
        self._blocks = {t: SparseBlock.unpack(self._buffers[t], self._layouts[t]) for t in (False, True)}

    def buffer(self, transpose: bool) -> torch.Tensor:
        return self._buffers[transpose]

    def layout(self, transpose: bool) -> PackedLayout:
        return self._layouts[transpose]

    def block(self, transpose: bool) -> SparseBlock:
        """``A`` (or ``Aᵀ`` when ``transpose``) as a block without its own transpose."""
        return self._blocks[transpose]
