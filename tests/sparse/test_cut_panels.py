"""`gridgnn.sparse.cut.cut_panels`: panels of a row block equal scipy's slices, read chunk by chunk."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.data.prepared import RowBlockCSR
from gridgnn.errors import DataError
from gridgnn.sparse import cut
from gridgnn.sparse.cut import cut_panels


def random_matrix(n: int = 53, m: int = 47, density: float = 0.12, seed: int = 3) -> sp.csr_matrix:
    matrix = sp.random(n, m, density=density, format="csr", dtype=np.float32, random_state=seed)
    matrix = matrix.tolil()
    matrix[5, :] = 0  # empty rows, including a run of them
    matrix[20:24, :] = 0
    matrix[30, :] = np.arange(1, m + 1)  # a dense row, longer than the small chunk budget below
    return matrix.tocsr()


PANEL_SETS = {
    "cover": [(0, 10), (10, 11), (11, 30), (30, 47)],
    "gaps": [(3, 9), (15, 15), (20, 40)],
    "one": [(0, 47)],
}


@pytest.mark.parametrize("chunk", [1, 7, 1 << 22])
@pytest.mark.parametrize("panels", PANEL_SETS.values(), ids=PANEL_SETS.keys())
@pytest.mark.parametrize("rows", [(0, 53), (4, 31), (21, 23), (10, 10)])
def test_panels_equal_scipy_slices(monkeypatch, chunk, panels, rows):
    monkeypatch.setattr(cut, "CHUNK_ENTRIES", chunk)
    matrix = random_matrix()
    r0, r1 = rows
    keep = range(0, len(panels), 2)
    nnz, kept = cut_panels(matrix, rows, panels, keep)
    expected = [matrix[r0:r1, c0:c1] for c0, c1 in panels]
    assert nnz == [block.nnz for block in expected]
    assert sorted(kept) == list(keep)
    for k in keep:
        assert kept[k].shape == expected[k].shape
        assert kept[k].dtype == np.float32
        np.testing.assert_array_equal(kept[k].toarray(), expected[k].toarray())
        assert kept[k].has_sorted_indices


def test_memory_mapped_rows_cut_the_same(tmp_path):
    matrix = random_matrix(seed=11)
    arrays = {}
    for name in ("indptr", "indices", "data"):
        np.save(tmp_path / f"{name}.npy", getattr(matrix, name))
        arrays[name] = np.load(tmp_path / f"{name}.npy", mmap_mode="r")
    mapped = RowBlockCSR(arrays["indptr"], arrays["indices"], arrays["data"], matrix.shape)
    panels = PANEL_SETS["cover"]
    nnz, kept = cut_panels(mapped, (7, 44), panels, [1, 3])
    assert nnz == [matrix[7:44, a:b].nnz for a, b in panels]
    np.testing.assert_array_equal(kept[3].toarray(), matrix[7:44, 30:47].toarray())


def test_keep_nothing_only_counts():
    matrix = random_matrix()
    nnz, kept = cut_panels(matrix, (0, 53), PANEL_SETS["cover"], [])
    assert kept == {} and sum(nnz) == matrix.nnz


def test_damaged_input_is_a_data_error():
    matrix = random_matrix()
    bad_cols = RowBlockCSR(matrix.indptr, np.where(matrix.indices == 3, 99, matrix.indices), matrix.data,
                           matrix.shape, source="prep")
    with pytest.raises(DataError, match="prep: column ids outside"):
        cut_panels(bad_cols, (0, 53), [(0, 47)], [0])
    pointers = matrix.indptr.copy()
    pointers[10] = pointers[12] + 1
    bad_rows = RowBlockCSR(pointers, matrix.indices, matrix.data, matrix.shape)
    with pytest.raises(DataError, match="row pointers decrease"):
        cut_panels(bad_rows, (0, 53), [(0, 47)], [0])


def test_overlapping_panels_are_refused():
    with pytest.raises(ValueError, match="disjoint"):
        cut_panels(random_matrix(), (0, 5), [(0, 10), (5, 20)], [0])


def test_peak_is_the_kept_panel_plus_one_chunk(monkeypatch):
    """The row block is never copied whole: numpy's allocations (traced) stay far below its size."""
    import tracemalloc

    matrix = sp.random(4000, 4000, density=0.03, format="csr", dtype=np.float32, random_state=5)
    row_block_bytes = matrix.indices.nbytes + matrix.data.nbytes  # what adj[r0:r1] would copy
    monkeypatch.setattr(cut, "CHUNK_ENTRIES", 10_000)
    panels = [(a, a + 500) for a in range(0, 4000, 500)]
    tracemalloc.start()
    try:
        nnz, kept = cut_panels(matrix, (0, 4000), panels, [2])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    panel_bytes = kept[2].indices.nbytes + kept[2].data.nbytes + kept[2].indptr.nbytes
    assert sum(nnz) == matrix.nnz and kept[2].nnz == nnz[2]
    assert peak < 0.5 * row_block_bytes and peak < 4 * panel_bytes, (peak, row_block_bytes, panel_bytes)
