"""LAI of the 0-1 loss (qs.inference.zero_one) against enumeration of all labellings."""

import itertools

import numpy as np
import pytest

from qs.inference import lai


@pytest.mark.parametrize("seed", range(30))
def test_zero_one_is_the_most_violated_labelling(seed):
    """Against enumeration of all labellings, and its slack against scikit-learn's hinge loss."""
    from sklearn.metrics import hinge_loss

    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    scores = rng.normal(0, 1.5, n)
    labels = np.r_[True, False, rng.random(n - 2) < 0.5]
    y = np.where(labels, 1.0, -1.0)
    res = lai(scores, labels, "01")
    best = max(
        np.mean(np.array(flip) != y) + np.dot(flip, scores) / (2 * n)
        for flip in itertools.product([-1.0, 1.0], repeat=n)
    )
    assert res.objective == pytest.approx(best, rel=1e-12, abs=1e-15)
    assert res.ground_truth_F == pytest.approx(np.dot(y, scores) / (2 * n), rel=1e-12)
    assert res.objective - res.ground_truth_F == pytest.approx(
        hinge_loss(y, scores), rel=1e-9, abs=1e-12
    )
    assert res.objective == pytest.approx(res.loss + res.coef @ scores, rel=1e-12, abs=1e-15)
    assert res.neg_rank is None


def test_zero_one_leaves_out_as_it_was_on_bad_scores():
    coef = np.full(4, 7.0)
    with pytest.raises(ValueError, match="finite; got .*nan.* at index 2"):
        lai([0.5, -0.5, np.nan, 0.1], [1, 0, 0, 1], "01", out=(None, coef))
    np.testing.assert_array_equal(coef, 7.0)
