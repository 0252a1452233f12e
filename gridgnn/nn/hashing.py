"""Counter-based keep/drop decisions: a pure function of (seed, epoch, layer, global row, global column).

Two levels of hashing:

1. Each global row id and each global column id is hashed once per (seed, epoch, layer) stream with
   splitmix64's finalizer (int64 torch arithmetic, any id below 2^63), under a row key and a column key;
   the high 32 bits are kept (`id_hashes`, int32).
2. Element (r, c) mixes the pair with murmur3's 32-bit finalizer ``fmix32(row_hash[r] ^ col_hash[c])`` and is
   kept when the result, read as a signed int32 (uniform on [-2^31, 2^31)), clears `threshold` (p is thus
   rounded to a multiple of 2^-32).

The per-element step is the whole cost of dropout over a dense n x f block, so it is 32-bit (twice the SIMD
lanes of 64-bit, and no 64-bit multiply, which x86 lacks before AVX-512) and, on CPU, runs in numpy on
cache-sized chunks in place: numpy has logical shifts on uint32 (torch's int32 shift is arithmetic and needs a
mask after it), about 1 µs of overhead per call instead of torch's several, and no thread-pool
synchronization per operation (which costs milliseconds on a loaded machine). Other devices run the same
arithmetic in torch int32 (two's complement wrap-around); the tests check that both give the same bits.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch import Tensor

_M64 = (1 << 64) - 1
_C1, _C2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_SHIFTS = ((30, _C1), (27, _C2))
_F1, _F2 = 0x85EBCA6B, 0xC2B2AE35
_CPU_CHUNK, _GPU_CHUNK = 1 << 16, 1 << 24
"""Elements per in-place chunk: 2 x 256 KiB of uint32 stay in a CPU's L2; GPUs want few, large launches."""


def _signed(c: int, bits: int = 64) -> int:
    """The signed ``bits``-bit integer with the bits of the unsigned integer c."""
    c &= (1 << bits) - 1
    return c - (1 << bits) if c >= 1 << (bits - 1) else c


def _mix_(h: Tensor, scratch: Tensor) -> Tensor:
    """splitmix64 finalizer applied in place to int64 ``h``; ``scratch`` has h's shape. Returns h."""
    for shift, constant in _SHIFTS:
        torch.bitwise_right_shift(h, shift, out=scratch)
        scratch &= (1 << (64 - shift)) - 1
        h ^= scratch
        h *= _signed(constant)
    torch.bitwise_right_shift(h, 31, out=scratch)
    scratch &= (1 << 33) - 1
    h ^= scratch
    return h


def _mix(h: Tensor) -> Tensor:
    """splitmix64 finalizer of int64 ids (any shape), as a new tensor."""
    h = h.to(torch.int64, copy=True)
    return _mix_(h, torch.empty_like(h))


def _mix_int(h: int) -> int:
    """Python-int twin of `_mix` on unsigned 64-bit values."""
    h &= _M64
    for shift, constant in _SHIFTS:
        h = ((h ^ (h >> shift)) * constant) & _M64
    return h ^ (h >> 31)


def _fmix32_int(h: int) -> int:
    """Python-int reference of murmur3's fmix32 on an unsigned 32-bit value."""
    h &= 0xFFFFFFFF
    h = ((h ^ (h >> 16)) * _F1) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * _F2) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _fmix32_numpy_(h: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """fmix32 in place on a uint32 array; ``scratch`` is a uint32 array of h's shape. Returns h."""
    np.right_shift(h, 16, out=scratch)
    h ^= scratch
    h *= np.uint32(_F1)
    np.right_shift(h, 13, out=scratch)
    h ^= scratch
    h *= np.uint32(_F2)
    np.right_shift(h, 16, out=scratch)
    h ^= scratch
    return h


def _fmix32_torch_(h: Tensor, scratch: Tensor) -> Tensor:
    """fmix32 in place on int32 ``h`` (the bits of uint32 values); logical shifts by masking. Returns h."""
    for shift, constant in ((16, _F1), (13, _F2)):
        torch.bitwise_right_shift(h, shift, out=scratch)
        scratch &= (1 << (32 - shift)) - 1
        h ^= scratch
        h *= _signed(constant, 32)
    torch.bitwise_right_shift(h, 16, out=scratch)
    scratch &= (1 << 16) - 1
    h ^= scratch
    return h


def stream_keys(seed: int, epoch: int, layer: int) -> tuple[int, int]:
    """Two int64 keys of one (seed, epoch, layer) stream: one for row ids, one for column ids."""
    h = _mix_int(seed ^ 0x9E3779B97F4A7C15)
    h = _mix_int(h ^ epoch)
    h = _mix_int(h ^ (layer + 0x632BE59BD9B4E019))
    return _signed(_mix_int(h ^ 1)), _signed(_mix_int(h ^ 2))


def threshold(p: float) -> int:
    """Signed int32 threshold: a uniform int32 is >= it with probability 1 - p (p in [0, 1), rounded to
    a multiple of 2^-32)."""
    return min(-(1 << 31) + int(round(p * 2.0**32)), (1 << 31) - 1)


def id_hashes(ids: Tensor, key: int) -> Tensor:
    """32-bit hashes (int32, ids' shape) of global ids under one stream key."""
    return torch.bitwise_right_shift(_mix(ids.to(torch.int64) ^ key), 32).to(torch.int32)


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


def keep_mask(row_ids: Tensor, col_ids: Tensor, p: float, *, seed: int, epoch: int, layer: int,
              scale: float | None = None, dtype: torch.dtype = torch.float32) -> Tensor:
    """Keep-mask of shape (len(row_ids), len(col_ids)) for the block with these global ids.

    Each element is kept with probability 1 - p; the mask of any block equals the matching slice of the
    mask of the whole matrix. Bool, or, when ``scale`` is given, ``dtype`` holding ``scale`` where kept
    and 0 elsewhere (what inverted dropout multiplies by; built chunk by chunk, no bool temporary).
    """
    row_key, col_key = stream_keys(seed, epoch, layer)
    rows, cols = id_hashes(row_ids.reshape(-1), row_key), id_hashes(col_ids.reshape(-1), col_key)
    if rows.device.type == "cpu":
        return _keep_mask_numpy(rows, cols, threshold(p), scale, dtype)
    return _keep_mask_torch(rows, cols, threshold(p), scale, dtype)


def masked_scale(x: Tensor, row_ids: Tensor, col_ids: Tensor, p: float, *, seed: int, epoch: int, layer: int,
                 relu: bool = False) -> tuple[Tensor, Tensor | None]:
    """Inverted dropout of a CPU block x (shape (len(row_ids), len(col_ids))) in one pass, chunk by chunk.

    Returns ``x * keep_mask(..., scale=1 / (1 - p))`` (bit for bit: x * keep is x or ±0, then * scale) and None;
    with ``relu``, ``relu(x)`` dropped out the same way and the bool mask (x's shape) of the elements that
    passed both (kept and x > 0), what the backward pass multiplies by. Not differentiable itself.
    """
    row_key, col_key = stream_keys(seed, epoch, layer)
    rows, cols = id_hashes(row_ids.reshape(-1), row_key), id_hashes(col_ids.reshape(-1), col_key)
    source = np.ascontiguousarray(x.detach().numpy())
    out = np.empty_like(source)
    passed = np.empty(source.shape, dtype=np.bool_) if relu else None
    scale = source.dtype.type(1.0 / (1.0 - p))
    for start, stop, keep in _keep_chunks(rows, cols, threshold(p)):
        if relu:
            np.greater(source[start:stop], 0, out=passed[start:stop])
            keep = np.logical_and(keep, passed[start:stop], out=passed[start:stop])
        np.multiply(source[start:stop], keep, out=out[start:stop])
        out[start:stop] *= scale
    return torch.from_numpy(out), None if passed is None else torch.from_numpy(passed)


def _keep_chunks(rows: Tensor, cols: Tensor, limit: int) -> Iterator[tuple[int, int, np.ndarray]]:
    """(start, stop, keep) for cache-sized row ranges of the block; keep (bool, (stop - start, f)) is
    overwritten by the next chunk."""
    m, f = rows.numel(), cols.numel()
    row_hash, col_hash = rows.numpy().view(np.uint32)[:, None], cols.numpy().view(np.uint32)[None, :]
    step = max(1, _CPU_CHUNK // max(f, 1))
    h = np.empty((min(step, m), f), dtype=np.uint32)
    scratch, keep = np.empty_like(h), np.empty(h.shape, dtype=np.bool_)
    for start in range(0, m, step):
        stop = min(start + step, m)
        hh, kk = h[:stop - start], keep[:stop - start]
        np.bitwise_xor(row_hash[start:stop], col_hash, out=hh)
        _fmix32_numpy_(hh, scratch[:stop - start])
        np.greater_equal(hh.view(np.int32), limit, out=kk)
        yield start, stop, kk


def _keep_mask_numpy(rows: Tensor, cols: Tensor, limit: int, scale: float | None,
                     dtype: torch.dtype) -> Tensor:
    """The mask: bool, or ``dtype`` holding ``scale`` where kept."""
    out_dtype = np.bool_ if scale is None else _numpy_dtype(dtype)
    out = np.empty((rows.numel(), cols.numel()), dtype=out_dtype)
    for start, stop, keep in _keep_chunks(rows, cols, limit):
        if scale is None:
            out[start:stop] = keep
        else:
            np.multiply(keep, out_dtype.type(scale), out=out[start:stop])
    return torch.from_numpy(out)


def _keep_mask_torch(rows: Tensor, cols: Tensor, limit: int, scale: float | None,
                     dtype: torch.dtype) -> Tensor:
    shape = (rows.numel(), cols.numel())
    out = torch.empty(shape, dtype=torch.bool if scale is None else dtype, device=rows.device)
    step = max(1, _GPU_CHUNK // max(cols.numel(), 1))
    for start in range(0, rows.numel(), step):
        h = rows[start:start + step, None] ^ cols[None, :]
        keep = _fmix32_torch_(h, torch.empty_like(h)) >= limit
        if scale is None:
            out[start:start + step] = keep
        else:
            torch.mul(keep, scale, out=out[start:start + step])
    return out


def keep_pairs(row_hashes: Tensor, col_hashes: Tensor, p: float) -> Tensor:
    """Bool keep decision (shape (k,)) for k pairs given their row and column `id_hashes` (int32, (k,))."""
    limit = threshold(p)
    if row_hashes.device.type == "cpu":
        h = np.bitwise_xor(row_hashes.numpy().view(np.uint32), col_hashes.numpy().view(np.uint32))
        _fmix32_numpy_(h, np.empty_like(h))
        return torch.from_numpy(h.view(np.int32) >= limit)
    h = row_hashes ^ col_hashes
    return _fmix32_torch_(h, torch.empty_like(h)) >= limit
