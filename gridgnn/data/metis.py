"""METIS k-way partitioning (`pymetis`), with one balance constraint or several; KaMinPar where METIS would
not fit in memory (`metis_fits`).

`membership(sym, parts, weights)` returns each vertex's part. One weight per vertex (or none: every vertex
weighs 1) goes through ``pymetis.part_graph``. Several weights per vertex (an ``(n, ncon)`` array: METIS's
*multi-constraint* mode, which keeps every column balanced across the parts at once) go through
``METIS_PartGraphKway`` / ``METIS_PartGraphRecursive`` of the METIS library that the pymetis wheel carries
and exports: pymetis's Python wrapper fixes ``ncon = 1``, so this module calls METIS's documented C entry
point with ``ctypes`` instead (METIS 5 manual, §5.5: ``METIS_PartGraphKway(nvtxs, ncon, xadj, adjncy, vwgt,
vsize, adjwgt, nparts, tpwgts, ubvec, options, objval, part)``). Every option keeps METIS's default (a fixed
seed, so the result is deterministic; the balance tolerance of k-way, 3 % on every constraint, and of
recursive bisection), as ``pymetis.part_graph`` does; like it, 8 parts or fewer use recursive bisection.
``idx_t``'s width is asked of the library itself (`_idx_type`). What METIS prints is kept off the terminal
(`gridgnn.c_output`). Not collective.
"""

from __future__ import annotations

import ctypes

import numpy as np
import scipy.sparse as sp

from gridgnn.c_output import c_output_captured
from gridgnn.errors import ConfigError

_METIS_OK = 1
_METIS_ERROR_MEMORY = -3
_METIS_NOPTIONS = 40  # idx_t options[METIS_NOPTIONS]; -1 everywhere = every default
_MAX_RECURSIVE_PARTS = 8  # pymetis's own rule for recursive bisection against k-way


def membership(sym: sp.csr_matrix, parts: int, weights: np.ndarray | None = None, *, method: str = "metis"
               ) -> np.ndarray:
    """The part (int64, in ``[0, parts)``) of every vertex of the symmetric pattern ``sym`` (n x n CSR, no
    diagonal), minimizing the edges cut with the parts balanced in ``weights``: None (vertices), shape (n,)
    or (n, ncon) positive ints. ``method`` names the reordering in error messages."""
    weights = None if weights is None else np.asarray(weights, dtype=np.int64)
    if (weights is None or weights.ndim == 1 or weights.shape[1] == 1) and not metis_fits(sym):
        from gridgnn.data.kaminpar_parts import kaminpar_membership

        return kaminpar_membership(sym, parts, None if weights is None else weights.reshape(-1), method)
    return metis_membership(sym, parts, weights, method=method)


def metis_membership(sym: sp.csr_matrix, parts: int, weights: np.ndarray | None = None, *, method: str = "metis"
                     ) -> np.ndarray:
    """`membership` by METIS, whatever the memory (``weights``: None, (n,) or (n, ncon) positive ints)."""
    pymetis = _import_pymetis(method)
    if weights is not None and weights.ndim == 2 and weights.shape[1] > 1:
        return _multi_constraint(pymetis, sym, parts, weights, method)
    vweights = None if weights is None else weights.reshape(-1).tolist()
    with c_output_captured():  # METIS prints its complaints ("***Cannot bisect ...") on stdout
        if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025
            _, parts_of = pymetis.part_graph(parts, adjacency=pymetis.CSRAdjacency(sym.indptr, sym.indices),
                                             vweights=vweights)
        else:
            _, parts_of = pymetis.part_graph(parts, xadj=sym.indptr, adjncy=sym.indices, vweights=vweights)
    return np.asarray(parts_of, dtype=np.int64)


METIS_BYTES_PER_ENTRY = 140
"""METIS's memory per stored entry of the symmetric pattern, measured on R-MAT (`benchmarks/metis_scale.py`):
3.08 GB for 31.4 M entries at scale 20 (98 bytes), and more than 17.9 GB allocated for 134 M at scale 22 when it
failed in 24 GiB (over 134 bytes)."""


def metis_fits(sym: sp.csr_matrix) -> bool:
    """The rule for ``--reorder metis|metis-nnz``: METIS when `METIS_BYTES_PER_ENTRY` times the pattern's
    entries fits in the memory this machine has available now (``MemAvailable``; always where that is
    unknown), else KaMinPar (`gridgnn.data.kaminpar_parts`). ``metis-balanced`` (two constraints, which
    KaMinPar does not balance) always runs METIS."""
    available = available_memory_bytes()
    return available is None or METIS_BYTES_PER_ENTRY * int(sym.nnz) <= available


def available_memory_bytes() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes, or None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _import_pymetis(method: str):
    try:
        import pymetis
    except ImportError:
        raise ConfigError(f"--reorder {method} needs pymetis: pip install 'gridgnn[metis]' (or pip install "
                          "pymetis), or choose --reorder rcm|random") from None
    return pymetis


def _multi_constraint(pymetis, sym: sp.csr_matrix, parts: int, weights: np.ndarray, method: str) -> np.ndarray:
    """METIS with ``weights.shape[1]`` balance constraints, through the library inside pymetis's extension."""
    library, idx = _metis_library(pymetis, method)
    n, ncon = weights.shape
    xadj = np.ascontiguousarray(sym.indptr, dtype=idx)
    adjncy = np.ascontiguousarray(sym.indices, dtype=idx)
    vwgt = np.ascontiguousarray(weights, dtype=idx)  # row-major: vertex v's ncon weights side by side
    options = np.full(_METIS_NOPTIONS, -1, dtype=idx)
    part = np.zeros(n, dtype=idx)
    c_idx = ctypes.c_int64 if idx == np.int64 else ctypes.c_int32
    objval = c_idx(0)
    entry = library.METIS_PartGraphRecursive if parts <= _MAX_RECURSIVE_PARTS else library.METIS_PartGraphKway
    entry.restype = ctypes.c_int
    with c_output_captured() as said:
        status = entry(ctypes.byref(c_idx(n)), ctypes.byref(c_idx(ncon)), _pointer(xadj), _pointer(adjncy),
                       _pointer(vwgt), None, None, ctypes.byref(c_idx(parts)), None, None, _pointer(options),
                       ctypes.byref(objval), _pointer(part))
    if status == _METIS_ERROR_MEMORY:
        raise MemoryError(f"METIS ran out of memory partitioning {n} vertices for --reorder {method}")
    if status != _METIS_OK:
        told = " ".join(said[0].replace("***", " ").split())[:200]
        raise ConfigError(f"METIS refused the graph for --reorder {method} (status {status}"
                          f"{': ' + told if told else ''}); choose --reorder metis or metis-nnz")
    return part.astype(np.int64, copy=False)


def _metis_library(pymetis, method: str) -> tuple[ctypes.CDLL, type]:
    """pymetis's extension as a C library exporting METIS's API, and its ``idx_t`` (numpy type)."""
    from pymetis import _internal

    library = _open_library(_internal.__file__)
    if not all(hasattr(library, name) for name in ("METIS_PartGraphKway", "METIS_PartGraphRecursive",
                                                    "METIS_SetDefaultOptions")):
        raise ConfigError(f"--reorder {method} needs METIS's C API, which this pymetis "
                          f"({getattr(pymetis, '__version__', '?')}) does not export: pip install -U pymetis, "
                          "or choose --reorder metis or metis-nnz")
    return library, _idx_type(library)


def _idx_type(library: ctypes.CDLL) -> type:
    """The library's ``idx_t`` (np.int64 or np.int32), asked of METIS itself: ``METIS_SetDefaultOptions``
    writes -1 into all 40 options of a buffer wide enough for 64-bit ones; with 32-bit ``idx_t`` only its
    first half changes. (pymetis's ``_idx_type_width`` exists only from 2025.2.1, and its wheels have used
    64-bit ``idx_t`` since 2023.1: guessing would let METIS read and write past 32-bit arrays.)"""
    sentinel = 0x0101010101010101
    probe = np.full(_METIS_NOPTIONS, sentinel, dtype=np.int64)
    library.METIS_SetDefaultOptions(_pointer(probe))
    if (probe == -1).all():
        return np.int64
    if (probe[:_METIS_NOPTIONS // 2] == -1).all() and (probe[_METIS_NOPTIONS // 2:] == sentinel).all():
        return np.int32
    raise ConfigError("METIS inside pymetis answered METIS_SetDefaultOptions unexpectedly; "
                      "choose --reorder metis or metis-nnz")


def _open_library(path: str) -> ctypes.CDLL:
    """The shared library at ``path`` (pymetis's extension, already loaded by Python: the same handle)."""
    return ctypes.CDLL(path)


def _pointer(array: np.ndarray):
    return array.ctypes.data_as(ctypes.c_void_p)
