"""The structured hinge summed on its own (qs.inference._hinge): exact to rounding at any
spread of the scores, where ``objective - ground_truth_F`` loses every digit."""

from fractions import Fraction

import numpy as np
import pytest

from qs.inference import lai, lai_queries
from qs.inference.batch import lai_batch
from qs.inference.bucket import _bucket_chunked
from qs.losses import get_loss

RANKING = {
    "ap": ["qs", "yue", "search", "sort_dc", "bucket", "bucket_sort", "auto"],
    "ndcg": ["qs", "chakrabarti", "sort_dc", "bucket", "bucket_sort", "auto"],
}
CASES = [(loss, m) for loss, ms in RANKING.items() for m in ms]
#: the spreads of the hostile-input audit: one positive at +M and one negative at -M
SPREADS = (1e15, 1e17, 1e300)


def spread_input(m, n=40, seed=0, dtype=np.float64):
    """A positive at +m and a negative at -m before ``n`` ordinary scores (30% positive):
    both extremes lie in their ground-truth places, so the hinge does not depend on m."""
    rng = np.random.default_rng(seed)
    scores = np.r_[m, -m, rng.normal(size=n)].astype(dtype)
    labels = np.r_[True, False, rng.random(n) < 0.3]
    return scores, labels


def exact_hinge(scores, labels, neg_rank, loss):
    """``loss + F(R) - F(R*)`` of the ranking ``neg_rank`` in rational arithmetic, from the
    ranks alone: ``2/(PN)`` times the sum over the pairs out of order of ``s_y - s_x``,
    written per sample (a negative weighs the positives below it, a positive minus the
    negatives above it)."""
    scores = np.asarray(scores, dtype=np.float64)
    pos = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    order = np.argsort(-scores[pos], kind="stable")
    per_rank = np.bincount(neg_rank, minlength=n_pos + 2)
    n_above = np.cumsum(per_rank)[1 : n_pos + 1]  # negatives above the i-th positive
    total = sum(
        Fraction(int(n_pos + 1 - r)) * Fraction(float(s)) for s, r in zip(scores[~pos], neg_rank)
    )
    total -= sum(Fraction(int(a)) * Fraction(float(s)) for s, a in zip(scores[pos][order], n_above))
    value = get_loss(loss).value(n_above)
    return value + float(Fraction(2, n_pos * n_neg) * total)


@pytest.mark.parametrize("loss,method", CASES)
@pytest.mark.parametrize("spread", SPREADS)
def test_hinge_is_exact_at_a_large_spread(spread, loss, method):
    scores, labels = spread_input(spread)
    res = lai(scores, labels, loss, method)
    assert res.hinge == pytest.approx(exact_hinge(scores, labels, res.neg_rank, loss), rel=1e-13)
    # the extremes sit in their places: the same ranking, the same hinge as at a spread
    # the difference of the two sums still holds
    moderate = lai(*spread_input(1e3), loss, method)
    np.testing.assert_array_equal(res.neg_rank, moderate.neg_rank)
    assert res.hinge == pytest.approx(moderate.objective - moderate.ground_truth_F, rel=1e-12)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
@pytest.mark.parametrize("spread", SPREADS)
def test_hinge_is_exact_at_a_large_spread_on_large_inputs(spread, loss):
    """Inputs the default sends to ``bucket`` and those it sorts, the threaded ``bucket``
    in pieces, and the exhaustive oracle, with the extremes among them."""
    rng = np.random.default_rng(3)
    for n, share in ((30_000, 0.01), (30_000, 0.3)):
        scores = rng.normal(size=n)
        labels = rng.random(n) < share
        labels[:2] = True, False
        scores[:2] = spread, -spread
        res = lai(scores, labels, loss)
        exact = exact_hinge(scores, labels, res.neg_rank, loss)
        assert res.hinge == pytest.approx(exact, rel=1e-12)
        neg_rank, coef = np.empty(n - labels.sum(), dtype=np.int32), np.empty(n)
        out = _bucket_chunked(get_loss(loss), scores, labels, int(labels.sum()), neg_rank, coef, 3)
        assert get_loss(loss).value(out[4]) + out[5] == pytest.approx(exact, rel=1e-12)
    scores, labels = spread_input(spread, n=5)
    res = lai(scores, labels, loss, "brute")
    assert res.hinge == pytest.approx(exact_hinge(scores, labels, res.neg_rank, loss), rel=1e-13)


@pytest.mark.parametrize("loss", ["ap", "ndcg", "01"])
@pytest.mark.parametrize("spread", SPREADS)
def test_batch_and_queries_hinge_at_a_large_spread(spread, loss):
    """lai_batch (small-query route, sorted route, bucket) and lai_queries give lai's
    hinge."""
    rows = [spread_input(spread, n, seed) for n, seed in ((40, 0), (40, 1))]
    scores, labels = np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])
    expected = [lai(s, y, loss).hinge for s, y in rows]
    for method in ("auto", "bucket") if loss != "01" else ("auto",):
        res = lai_batch(scores, labels, loss, method)
        np.testing.assert_allclose(res.hinge, expected, rtol=1e-13)
    if loss != "01":  # lai_queries ranks
        res = lai_queries(
            scores.ravel(), labels.ravel(), [0, scores.shape[1], scores.size], loss=loss
        )
        np.testing.assert_allclose(res.hinge, expected, rtol=1e-13)
        exact = [exact_hinge(s, y, lai(s, y, loss).neg_rank, loss) for s, y in rows]
        np.testing.assert_allclose(expected, exact, rtol=1e-13)


def test_zero_one_hinge_is_the_mean_hinge_at_a_large_spread():
    for spread in SPREADS:
        scores, labels = spread_input(spread)
        y = np.where(labels, 1.0, -1.0)
        margin = 1.0 - y * scores
        exact = float(sum(Fraction(float(x)) for x in margin[margin > 0]) / scores.size)
        assert lai(scores, labels, "01").hinge == pytest.approx(exact, rel=1e-14)


def test_float32_scores_at_the_largest_spread():
    """float32 scores of +-3e38 (read in place by lai_batch, widened for lai)."""
    scores, labels = spread_input(3e38, dtype=np.float32)
    for loss in ("ap", "ndcg"):
        res = lai_batch(scores[None], labels[None], loss)
        single = lai(scores.astype(np.float64), labels, loss)
        exact = exact_hinge(scores, labels, single.neg_rank, loss)
        assert single.hinge == pytest.approx(exact, rel=1e-13)
        np.testing.assert_allclose(res.hinge, [exact], rtol=1e-13)


@pytest.mark.parametrize("loss", ["ap", "ndcg", "01"])
def test_hinge_is_objective_minus_ground_truth_at_moderate_spreads(loss):
    """Where the difference of the two sums holds, the hinge is that difference."""
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(5, 400))
        scores = rng.normal(size=n) * 10.0 ** rng.integers(-3, 4)
        labels = rng.random(n) < rng.uniform(0.05, 0.6)
        labels[:2] = True, False
        for method in RANKING.get(loss, ["auto"]):
            res = lai(scores, labels, loss, method)
            assert res.hinge == pytest.approx(
                res.objective - res.ground_truth_F, rel=1e-12, abs=1e-15
            )
        batch = lai_batch(scores[None], labels[None], loss)
        assert batch.hinge[0] == pytest.approx(res.hinge, rel=1e-13)
