"""Counter-based keep/drop decisions: a pure function of (seed, epoch, layer, global row, global column).

The hash is splitmix64's finalizer in int64 torch arithmetic. Multiplications keep the low 64 bits (two's
complement wrap-around, the same on CPU and CUDA); right shifts are made logical by masking, because an
int64 ``>>`` is arithmetic and would smear the sign bit. Each row id and each column id is hashed once
(with a key derived from seed, epoch and layer); one more finalizer per element mixes the pair, and the
element is kept when the result, read as a signed int64 (uniform on [-2^63, 2^63)), clears a threshold.

Per-element work runs in place on cache-sized chunks: about 12 int64 operations per element, without
allocating a fresh n x f temporary for each (that alone made it ~10x slower).
"""

from __future__ import annotations

import torch
from torch import Tensor

_M64 = (1 << 64) - 1
_C1, _C2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_SHIFTS = ((30, _C1), (27, _C2))
_CPU_CHUNK, _GPU_CHUNK = 1 << 17, 1 << 24
"""Elements per in-place chunk: 1 MiB of int64 stays in a CPU cache; GPUs want few, large launches."""


def _signed(c: int) -> int:
    """The int64 value with the bits of the unsigned 64-bit integer c."""
    c &= _M64
    return c - (1 << 64) if c >= 1 << 63 else c


def _chunk(device: torch.device) -> int:
    return _CPU_CHUNK if device.type == "cpu" else _GPU_CHUNK


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


def stream_keys(seed: int, epoch: int, layer: int) -> tuple[int, int]:
    """Two int64 keys of one (seed, epoch, layer) stream: one for row ids, one for column ids."""
    h = _mix_int(seed ^ 0x9E3779B97F4A7C15)
    h = _mix_int(h ^ epoch)
    h = _mix_int(h ^ (layer + 0x632BE59BD9B4E019))
    return _signed(_mix_int(h ^ 1)), _signed(_mix_int(h ^ 2))


def threshold(p: float) -> int:
    """Signed threshold: a uniform int64 is >= it with probability 1 - p (p in [0, 1))."""
    return min(-(1 << 63) + int(round(p * 2.0**64)), (1 << 63) - 1)


def id_hashes(ids: Tensor, key: int) -> Tensor:
    """Hashes (int64, ids' shape) of global ids under one stream key."""
    return _mix(ids.to(torch.int64) ^ key)


def keep_mask(row_ids: Tensor, col_ids: Tensor, p: float, *, seed: int, epoch: int, layer: int,
              scale: float | None = None, dtype: torch.dtype = torch.float32) -> Tensor:
    """Keep-mask of shape (len(row_ids), len(col_ids)) for the block with these global ids.

    Each element is kept with probability 1 - p; the mask of any block equals the matching slice of the
    mask of the whole matrix. Bool, or, when ``scale`` is given, ``dtype`` holding ``scale`` where kept
    and 0 elsewhere (what inverted dropout multiplies by; built chunk by chunk, no bool temporary).
    """
    row_key, col_key = stream_keys(seed, epoch, layer)
    rows, cols = id_hashes(row_ids.reshape(-1), row_key), id_hashes(col_ids.reshape(-1), col_key)
    shape = (rows.numel(), cols.numel())
    out = torch.empty(shape, dtype=torch.bool if scale is None else dtype, device=rows.device)
    step = max(1, _chunk(rows.device) // max(cols.numel(), 1))
    limit = threshold(p)
    for start in range(0, rows.numel(), step):
        h = rows[start:start + step, None] ^ cols[None, :]
        keep = _mix_(h, torch.empty_like(h)) >= limit
        if scale is None:
            out[start:start + step] = keep
        else:
            torch.mul(keep, scale, out=out[start:start + step])
    return out


def keep_pairs(row_hashes: Tensor, col_hashes: Tensor, p: float) -> Tensor:
    """Bool keep decision (shape (k,)) for k pairs given their row and column `id_hashes` (shape (k,))."""
    out = torch.empty(row_hashes.numel(), dtype=torch.bool, device=row_hashes.device)
    limit = threshold(p)
    step = _chunk(row_hashes.device)
    for start in range(0, row_hashes.numel(), step):
        stop = start + step
        h = row_hashes[start:stop] ^ col_hashes[start:stop]
        torch.ge(_mix_(h, torch.empty_like(h)), limit, out=out[start:stop])
    return out
