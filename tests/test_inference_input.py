"""The pass over the input (qs.inference._input): the reference score, the gather that splits
the negatives around a pivot."""

import numpy as np
import pytest

from qs.inference._input import (
    KEY_LOW,
    KEY_SHIFT,
    REFERENCE_SAMPLE,
    finite_reference,
    reference,
    scan_gather_split,
    unsplit,
)


@pytest.mark.parametrize("n", [1, 2, 30, 31, 61, 62, 100, 3312, 100003])
def test_reference_is_the_median_of_its_strided_sample(n):
    """The reference score, found by counting, is the middle of the sorted strided sample,
    with ties and NaN among the scores too."""
    rng = np.random.default_rng(n)
    for kind in ("normal", "ties", "nan"):
        x = rng.normal(size=n)
        if kind == "ties":
            x = np.round(x)
        elif kind == "nan":
            x[rng.random(n) < 0.3] = np.nan
        sample = np.sort(x[:: max(1, n // REFERENCE_SAMPLE)])
        np.testing.assert_array_equal(reference(x), sample[sample.size // 2])


@pytest.mark.parametrize("n", [1, 2, 3, 31, 62, 118, 519, 3312])
def test_finite_reference_is_the_reference_bit_for_bit(n):
    """finite_reference, selected by buckets in work arrays that are not cleared, returns
    reference's score bit for bit: float32 scores, ties, zeros of both signs (the first of
    the sample's tied zeros, as reference returns), an outlier that puts the rest in one
    bucket, and a range that overflows (float64)."""
    rng = np.random.default_rng(n)
    for kind in ("normal", "ties", "zeros", "outlier", "overflow"):
        x = rng.normal(size=n)
        if kind == "ties":
            x = np.round(x)
        elif kind == "zeros":
            x = np.where(rng.random(n) < 0.5, 0.0, -0.0)
        elif kind == "outlier":
            x[0] = 1e30
        elif kind == "overflow":
            x[0], x[-1] = -1e308, 1e308
        for scores in (x, x.astype(np.float32)) if kind != "overflow" else (x,):
            sample, bucket = rng.normal(size=n + 2), rng.integers(-9, 9, n + 2)
            count = rng.integers(-9, 9, 2 * n + 2)
            expected = reference(scores.astype(np.float64))
            got = finite_reference(scores, sample, bucket, count)
            assert np.float64(got).tobytes() == np.float64(expected).tobytes()


def test_the_split_gather_splits_and_keeps_every_negative():
    """scan_gather_split: negatives above the pivot first (input order), the others after
    them (reverse input order until unsplit), each with its key, and the sums."""
    rng = np.random.default_rng(4)
    scores = rng.integers(-3, 4, 500).astype(float)
    is_pos = (rng.random(500) < 0.1).astype(np.uint8)
    n_pos = int(is_pos.sum())
    neg = np.flatnonzero(is_pos == 0)
    v, key = np.empty(neg.size), np.empty(neg.size, np.int64)
    pv, pi = np.empty(n_pos), np.empty(n_pos, np.int64)
    err, _, sum_pos, sum_neg, above = scan_gather_split(scores, is_pos, 0.5, 0.0, pv, pi, v, key)
    assert err == 0 and above == np.count_nonzero(scores[neg] > 0.0)
    assert sum_neg == pytest.approx((scores[neg] - 0.5).sum())
    assert sum_pos == pytest.approx((scores[is_pos == 1] - 0.5).sum())
    np.testing.assert_array_equal(pi, np.flatnonzero(is_pos))
    np.testing.assert_array_equal(scores[key >> KEY_SHIFT], v)
    np.testing.assert_array_equal(neg[key & KEY_LOW], key >> KEY_SHIFT)  # ordinal -> index
    unsplit(v, key, above)
    up, down = key[:above] >> KEY_SHIFT, key[above:] >> KEY_SHIFT
    np.testing.assert_array_equal(up, neg[scores[neg] > 0.0])  # each part in input order
    np.testing.assert_array_equal(down, neg[scores[neg] <= 0.0])
