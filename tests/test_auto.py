"""The default method's choice (qs.inference.auto): what it reads of the input, and that
every branch gives the exact result."""

import numpy as np
import pytest

from qs.inference import lai
from qs.inference._core import SHARE_SAMPLE, settled_share
from qs.inference.auto import SETTLED_SHARE, SORT_BELOW


def inputs(n_pos, n_neg, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.r_[np.ones(n_pos, np.uint8), np.zeros(n_neg, np.uint8)])
    return rng.standard_normal(n_pos + n_neg), labels


def test_settled_share_reads_ties_training_and_random_scores():
    scores, labels = inputs(300, 3000)
    trained = np.where(labels == 1, scores + 10.0, scores)  # every negative below the positives
    assert settled_share(np.zeros_like(scores), labels) == 1.0  # all tie: the first iteration
    assert settled_share(trained, labels) == 1.0
    assert settled_share(scores, labels) < 0.05  # random: the lowest positive is far down
    half = np.where(labels == 1, 0.0, np.r_[-np.ones(1650), np.ones(1650)])  # half below
    assert settled_share(half, labels) == pytest.approx(0.5, abs=0.1)


def test_settled_share_finds_the_lowest_positive_outside_the_sample():
    n = 40 * SHARE_SAMPLE
    labels = np.zeros(n, np.uint8)
    labels[1] = 1  # off the stride: the sample holds no positive
    scores = np.linspace(1.0, -1.0, n)
    assert settled_share(scores, labels) == pytest.approx(1.0, abs=0.01)
    scores[1] = -2.0
    assert settled_share(scores, labels) == 0.0


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
@pytest.mark.parametrize("kind", ["random", "ties", "trained", "most_below", "large"])
def test_every_branch_is_exact(loss, kind):
    n_neg = 2 * SORT_BELOW if kind == "large" else 3000
    scores, labels = inputs(200, n_neg, seed=1)
    if kind == "ties":
        scores[:] = 0.0
    elif kind == "trained":
        scores = np.where(labels == 1, scores + 2.0, scores - 2.0)
    elif kind == "most_below":  # 60% of the negatives below every positive, the rest spread
        scores = np.where((labels == 0) & (np.arange(scores.size) % 5 < 3), -10.0, scores)
    share = settled_share(scores, labels)
    settled = kind in ("ties", "trained", "most_below")
    assert (share >= SETTLED_SHARE) == settled or kind == "large"
    ours = lai(scores, labels, loss, "auto")
    ref = lai(scores, labels, loss, "sort_dc")
    np.testing.assert_array_equal(ours.neg_rank, ref.neg_rank)
    np.testing.assert_array_equal(ours.coef, ref.coef)
    assert ours.objective == pytest.approx(ref.objective, rel=1e-12)
