"""The small-query route of lai_batch (qs/inference/_batch_small.py): lai's result."""

import numpy as np
import pytest

from qs.inference._batch_small import SMALL_ROW_MAX
from qs.inference.batch import lai_batch
from tests.test_inference_batch import batch_input, check_rows


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_mini_batch_route_is_lai_row_by_row(loss, ties):
    """The default's route for small queries (few positives, placed by counting; tied
    negatives in one bucket) gives every named method's result."""
    rng = np.random.default_rng(14)
    scores, labels = batch_input(rng, 10, 256, 0.1, ties)
    res = lai_batch(scores, labels, loss, gradient=True)
    check_rows(lai_batch(scores, labels, loss), scores, labels, loss, "auto")
    for method in ("bucket_sort", "qs"):
        other = lai_batch(scores, labels, loss, method, gradient=True)
        np.testing.assert_array_equal(other.rank, res.rank)
        np.testing.assert_array_equal(other.coef, res.coef)
        np.testing.assert_allclose(other.hinge, res.hinge, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_mini_batch_route_with_stretched_buckets_is_lai_row_by_row(loss):
    """An outlier lays the buckets over a range that puts the other negatives in one bucket
    (the insertion pass gives up for a merge sort), a range that overflows (no buckets), and
    many positives (sorted by merge sort, not placed by counting)."""
    rng = np.random.default_rng(15)
    scores, labels = batch_input(rng, 8, 256, 0.1, False)
    scores[3, np.flatnonzero(~labels[3])[5]] = 1e9
    scores[4, :2] = -1e308, 1e308
    scores[5] = np.round(scores[5], 1)  # ties, some across buckets of the outlier's range
    scores[5, 7] = 1e6
    labels[6] = rng.random(256) < 0.3
    check_rows(lai_batch(scores, labels, loss), scores, labels, loss, "auto")


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
@pytest.mark.parametrize("frac,n", [(0.2, 3000), (0.5, 3000), (0.8, 3000), (0.5, 40_000)])
def test_many_positives_batch_is_lai_row_by_row(loss, frac, n, ties):
    """Rows with hundreds of positives (sorted by buckets), more positives than negatives, and
    rows the default sorts that are too large for its small-row route, by the default and
    bucket_sort."""
    assert n < SMALL_ROW_MAX or (1 - frac) * n > SMALL_ROW_MAX
    rng = np.random.default_rng(int(frac * 10) + ties)
    scores, labels = batch_input(rng, 4, n, frac, ties)
    for method in ("auto", "bucket_sort"):
        check_rows(lai_batch(scores, labels, loss, method), scores, labels, loss, method)
