"""The kernels' sorts (qs.inference._sorting) against numpy's lexsort, ties included."""

import numpy as np
import pytest

from qs.inference._sorting import (
    POSITIVES_BY_BUCKETS,
    sort_pairs,
    sort_positives,
    sort_positives_hinted,
)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 100, 1000])
def test_sort_pairs_orders_by_descending_value_then_ascending_index(n):
    """The merge sort of the kernels against numpy's lexsort, with many ties."""
    rng = np.random.default_rng(n)
    v = np.round(rng.normal(size=n), 1)
    idx = rng.permutation(n).astype(np.int64)
    want = np.lexsort((idx, -v))
    expect_v, expect_i = v[want], idx[want]
    sort_pairs(v, idx, np.empty(n), np.empty(n, dtype=np.int64))
    np.testing.assert_array_equal(v, expect_v)
    np.testing.assert_array_equal(idx, expect_i)


@pytest.mark.parametrize("n", [257, 1000, 70_000, 300_000])
@pytest.mark.parametrize("ties", [False, True])
def test_many_positives_are_sorted_by_buckets_as_by_lexsort(n, ties):
    """sort_positives and sort_positives_hinted above POSITIVES_BY_BUCKETS (by buckets) give
    numpy's lexsort order: descending score, ties by input index."""
    assert n > POSITIVES_BY_BUCKETS
    rng = np.random.default_rng(n)
    v = rng.integers(0, 30, n).astype(float) if ties else rng.standard_cauchy(n)
    idx = np.sort(rng.choice(10 * n, n, replace=False)).astype(np.int64)  # input order
    want = np.lexsort((idx, -v))
    got_v, got_i = sort_positives(v, idx)
    np.testing.assert_array_equal(got_v, v[want])
    np.testing.assert_array_equal(got_i, idx[want])
    values, index = v.copy(), idx.copy()
    order = np.full(n, -1, dtype=np.int64)  # no hint: not a permutation
    sort_positives_hinted(
        values, index, order, np.empty(n), np.empty(n, dtype=np.int64), np.empty(16, dtype=np.int64)
    )
    np.testing.assert_array_equal(values, v[want])
    np.testing.assert_array_equal(index, idx[want])
    np.testing.assert_array_equal(order, want)


@pytest.mark.parametrize("n", [100, 5000])
def test_a_stale_hint_still_sorts_the_positives(n):
    """sort_positives_hinted from the order of other scores (a previous call's, of the same
    size: given up early) and from the right order (kept) gives lexsort's order."""
    rng = np.random.default_rng(n)
    idx = np.sort(rng.choice(3 * n, n, replace=False)).astype(np.int64)
    order = np.full(n, -1, dtype=np.int64)
    values = np.empty(0)  # the previous pass's sorted scores
    for v in (rng.normal(size=n), np.round(rng.normal(size=n), 1), None):
        v = v if v is not None else values[np.argsort(order)] + 0.0  # the same scores again
        want = np.lexsort((idx, -v))
        values, index = v.copy(), idx.copy()
        sort_positives_hinted(
            values,
            index,
            order,
            np.empty(n),
            np.empty(n, dtype=np.int64),
            np.empty(16, dtype=np.int64),
        )
        np.testing.assert_array_equal(values, v[want])
        np.testing.assert_array_equal(index, idx[want])
        np.testing.assert_array_equal(order, want)
