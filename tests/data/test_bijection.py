"""The seeded bijections computed id by id (`gridgnn.data.bijection`) and their inverses: each is a permutation of
[0, n) for any n (powers of two, one past them, tiny), the same map for the ids given in any order or chunk, and
its inverse undoes it pointwise (what ``--reorder double-random``'s receivers use to place their rows)."""

from __future__ import annotations

import numpy as np
import pytest

from gridgnn.data.bijection import mix_bits, mix_bits_inverse, random_bijection, random_bijection_inverse, seeded_keys


@pytest.mark.parametrize("n", [1, 2, 3, 64, 65, 1000, 65537])
@pytest.mark.parametrize("stream", [3, (4, 1)])
def test_a_random_bijection_is_a_permutation_and_its_inverse_undoes_it(n, stream):
    ids = np.arange(n, dtype=np.int64)
    forward = random_bijection(ids, n, seed=7, stream=stream)
    assert np.array_equal(np.sort(forward), ids)
    assert np.array_equal(random_bijection_inverse(forward, n, seed=7, stream=stream), ids)
    shuffled = np.random.default_rng(0).permutation(n)
    assert np.array_equal(random_bijection(shuffled, n, seed=7, stream=stream), forward[shuffled])  # pointwise
    if n > 3:
        assert not np.array_equal(forward, random_bijection(ids, n, seed=8, stream=stream))  # another seed
        assert not np.array_equal(forward, ids)


def test_mix_bits_inverse_undoes_every_round_on_wide_ids():
    keys = seeded_keys(5, 2)
    values = np.random.default_rng(1).integers(0, 1 << 40, size=5000).astype(np.uint64)
    assert np.array_equal(mix_bits_inverse(mix_bits(values, 40, keys), 40, keys), values)
    assert np.array_equal(mix_bits(mix_bits_inverse(values, 40, keys), 40, keys), values)
