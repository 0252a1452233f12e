"""Seeded bijections computed id by id: a random vertex order that no process has to hold whole.

`mix_bits` is a bijection of [0, 2**bits): four rounds of an odd multiply and an add modulo 2**bits, each followed
by an xor of the value with itself shifted right (every step is invertible on ``bits`` bits), keyed by a seeded
generator. `random_bijection` restricts it to [0, n) by cycle walking (apply it again while the value is n or more:
a bijection of the larger range restricted to the cycles through [0, n), two rounds on average since n > 2**bits / 2).
Both are pointwise, and so are their inverses (`mix_bits_inverse`, `random_bijection_inverse`): a process maps
its own ids, in any order, and gets the ids every other process would give them. The R-MAT generator scrambles
its vertex ids with `mix_bits` (`gridgnn.data.generators.rmat_scramble`); ``--reorder random`` orders the
vertices by `random_bijection` (`gridgnn.data.reorder`; the distributed preparation computes the same order
without a permutation table, `gridgnn.prepare.pipeline`); ``--reorder double-random`` also orders Â's columns
by it and its inverse (`gridgnn.cost.column_order`). Pure numpy.
"""

from __future__ import annotations

import numpy as np

REORDER_STREAM = 3
"""The generator stream (``default_rng([seed, REORDER_STREAM])``) of ``--reorder random``'s keys (R-MAT's
scramble uses stream 2)."""


def mix_bits(ids: np.ndarray, bits: int, keys: np.ndarray) -> np.ndarray:
    """A bijection of [0, 2**bits) applied to ``ids`` (uint64 out); ``keys`` (4, 2) uint64: each round's
    multiplier (made odd) and addend."""
    mask = np.uint64((1 << bits) - 1)
    shift = np.uint64(max(1, (bits + 1) // 2))
    x = np.asarray(ids).astype(np.uint64)
    for multiplier, addend in keys:
        x *= multiplier | np.uint64(1)
        x += addend
        x &= mask
        x ^= x >> shift
    return x


def mix_bits_inverse(values: np.ndarray, bits: int, keys: np.ndarray) -> np.ndarray:
    """The inverse of `mix_bits` (same ``bits`` and ``keys``) applied to ``values`` in [0, 2**bits) (uint64 out):
    each round undone in reverse order (the xor-shift by repeated shifts, the add by a subtraction, the odd
    multiply by its inverse modulo 2**bits)."""
    mask = np.uint64((1 << bits) - 1)
    shift = max(1, (bits + 1) // 2)
    x = np.asarray(values).astype(np.uint64)
    for multiplier, addend in keys[::-1]:
        undone, step = x.copy(), shift
        while step < bits:  # y = x ^ (x >> s)  =>  x = y ^ (y >> s) ^ (y >> 2s) ^ ...
            undone ^= x >> np.uint64(step)
            step += shift
        x = undone
        x -= addend
        x *= np.uint64(_odd_inverse(int(multiplier) | 1))
        x &= mask
    return x


def _odd_inverse(odd: int) -> int:
    """The inverse of an odd number modulo 2**64 (Newton's iteration: each step doubles the correct bits)."""
    inverse = odd
    for _ in range(6):
        inverse = inverse * (2 - odd * inverse) % (1 << 64)
    return inverse


def seeded_keys(seed: int, stream: int | tuple[int, ...]) -> np.ndarray:
    """The (4, 2) uint64 round keys of `mix_bits` drawn from ``default_rng([seed, *stream])``."""
    stream = (stream,) if isinstance(stream, int) else tuple(stream)
    return np.random.default_rng([seed, *stream]).integers(0, 1 << 62, size=(4, 2), dtype=np.uint64)


def random_bijection(ids: np.ndarray, n: int, seed: int, stream: int | tuple[int, ...] = REORDER_STREAM) -> np.ndarray:
    """The seeded bijection of [0, n) of ``--reorder random`` applied to ``ids`` (int64 in [0, n); int64 out): the
    new position of each vertex. Same ``seed``, same ``n``: the same map, whatever the ids' order or chunking.
    ``stream``: the generator stream of the keys (`seeded_keys`; another stream, another bijection)."""
    return _cycle_walk(mix_bits, ids, n, seed, stream)


def random_bijection_inverse(positions: np.ndarray, n: int, seed: int,
                             stream: int | tuple[int, ...] = REORDER_STREAM) -> np.ndarray:
    """The inverse of `random_bijection` (same n, seed and stream) applied to ``positions`` (int64 in [0, n);
    int64 out): the id at each position, pointwise (cycle walking backwards through the same cycles)."""
    return _cycle_walk(mix_bits_inverse, positions, n, seed, stream)


def _cycle_walk(step, ids: np.ndarray, n: int, seed: int, stream) -> np.ndarray:
    """``step`` (`mix_bits` or its inverse, on the bits of n - 1) applied to ``ids`` again while a value is n or
    more: a bijection of [0, n), or its inverse."""
    ids = np.asarray(ids, dtype=np.int64)
    if n <= 1 or ids.size == 0:
        return ids.copy()
    bits = int(n - 1).bit_length()
    keys = seeded_keys(seed, stream)
    out = step(ids, bits, keys)
    outside = np.flatnonzero(out >= np.uint64(n))
    while outside.size:  # each pass maps the stragglers once more
        out[outside] = step(out[outside], bits, keys)
        outside = outside[out[outside] >= np.uint64(n)]
    return out.astype(np.int64)


def random_order(n: int, seed: int) -> np.ndarray:
    """The vertex order (int64, (n,)) of `random_bijection`: row r of the reordered graph is vertex ``order[r]``,
    so ``order[random_bijection(v)] = v``."""
    order = np.empty(n, dtype=np.int64)
    order[random_bijection(np.arange(n, dtype=np.int64), n, seed)] = np.arange(n, dtype=np.int64)
    return order
