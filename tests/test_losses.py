"""Losses of a ranking and the metrics AP / NDCG, against scikit-learn and the definitions."""

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, ndcg_score

from qs.losses import APLoss, NDCGLoss, get_loss
from qs.metrics import average_precision, ndcg, negatives_above
from tests import naive


def random_problem(rng, n=40, ties=False):
    scores = rng.integers(0, 4, n).astype(float) if ties else rng.normal(size=n)
    labels = rng.random(n) < 0.3
    labels[:2] = [True, False]
    return scores, labels


@pytest.mark.parametrize("seed", range(20))
def test_metrics_match_scikit_learn_without_ties(seed):
    scores, labels = random_problem(np.random.default_rng(seed))
    assert average_precision(labels, scores) == pytest.approx(
        average_precision_score(labels, scores), rel=1e-12
    )
    assert ndcg(labels, scores) == pytest.approx(ndcg_score([labels], [scores]), rel=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_metrics_match_the_definitions_with_ties_broken_pessimistically(seed):
    scores, labels = random_problem(np.random.default_rng(seed), n=12, ties=True)
    order = np.lexsort((labels, -scores))  # negatives before positives among equal scores
    assert average_precision(labels, scores) == pytest.approx(
        naive.average_precision_of_order(list(labels[order])), rel=1e-12
    )
    assert ndcg(labels, scores) == pytest.approx(
        naive.ndcg_of_order(list(labels[order])), rel=1e-12
    )
    # scikit-learn's tie handling is never below the pessimistic order
    assert average_precision(labels, scores) <= average_precision_score(labels, scores) + 1e-12
    assert ndcg(labels, scores) <= ndcg_score([labels], [scores]) + 1e-12


def test_ap_is_invariant_to_increasing_transforms():
    scores, labels = random_problem(np.random.default_rng(3))
    ap = average_precision(labels, scores)
    assert average_precision(labels, 3.0 * scores + 7.0) == pytest.approx(ap, rel=1e-12)
    assert average_precision(labels, np.exp(scores)) == pytest.approx(ap, rel=1e-12)


@pytest.mark.parametrize("loss", [APLoss(), NDCGLoss()])
def test_loss_of_a_ranking(loss):
    assert loss.value(np.zeros(5)) == 0.0  # every positive above every negative
    worst = loss.value(np.full(5, 20))
    assert 0.0 < worst < 1.0
    # more negatives above a positive never lowers the loss
    assert loss.value([0, 1, 1, 3]) <= loss.value([0, 1, 2, 3])
    # a stack of rankings is evaluated row by row
    stack = np.array([[0, 0, 2], [1, 1, 1], [0, 3, 3]])
    np.testing.assert_allclose(loss.value(stack), [loss.value(row) for row in stack])


@pytest.mark.parametrize("loss", [APLoss(), NDCGLoss()])
def test_increment_sums_to_the_loss(loss):
    """delta_j(P+1) = 0 and the increments telescope: the loss of an interleaving equals the
    sum over negatives (in ranking order) of -sum_{i >= rank_j} increment(j, i)."""
    n_pos, n_neg = 6, 9
    rng = np.random.default_rng(0)
    for _ in range(20):
        ranks = np.sort(rng.integers(1, n_pos + 2, n_neg))
        total = 0.0
        for j, r in enumerate(ranks, start=1):
            i = np.arange(r, n_pos + 1)
            total -= loss.increment(j, i, n_pos, n_neg).sum()
        n_above = np.array([(ranks <= k).sum() for k in range(1, n_pos + 1)])
        assert total == pytest.approx(loss.value(n_above), rel=1e-12, abs=1e-15)


def test_negatives_above():
    labels = np.array([1, 0, 1, 0, 0, 1])
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    np.testing.assert_array_equal(negatives_above(labels, scores), [0, 1, 3])


def test_metric_errors():
    with pytest.raises(ValueError, match="no positive"):
        average_precision([0, 0], [0.1, 0.2])
    with pytest.raises(ValueError, match="finite"):
        ndcg([1, 0], [np.nan, 0.2])
    with pytest.raises(ValueError, match="Unknown loss"):
        get_loss("mrr")


def test_ap_increment_is_the_telescoped_difference():
    """Both forms of the AP increment, and the numba kernel, agree with delta_j(i+1) - delta_j(i)
    computed from the definition delta_j(i) = (1/P) sum_{k>=i} [j/(j+k) - (j-1)/(j+k-1)]."""
    loss, n_pos = APLoss(), 7
    for j in range(1, 12):
        delta = [
            sum(j / (j + k) - (j - 1) / (j + k - 1) for k in range(i, n_pos + 1)) / n_pos
            for i in range(1, n_pos + 2)
        ]
        i = np.arange(1, n_pos + 1)
        np.testing.assert_allclose(loss.increment(j, i, n_pos, 9), np.diff(delta), rtol=1e-12)
        kernel = [loss.kernel(j, int(t), n_pos, loss.prepare(n_pos, 9)) for t in i]
        np.testing.assert_allclose(kernel, np.diff(delta), rtol=1e-12)
