"""qs.pairwise: the pairwise RankSVM against the explicit pairs (loss, gradient, LinearSVC)."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.svm import LinearSVC

from qs.pairwise import PairwiseRankSVM, pairwise_squared_hinge


def graded(seed, n_queries=15, d=4, low=1, high=25):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(low, high, n_queries)
    groups = np.repeat(rng.permutation(n_queries) * 3 + 1, sizes)
    X = rng.normal(size=(sizes.sum(), d))
    y = np.digitize(X @ rng.normal(size=d) + rng.normal(size=sizes.sum()), [-0.5, 0.5, 1.5])
    return X, y, groups


def explicit_pairs(X, y, groups):
    """Every (x_i - x_j) with y_i > y_j in one query, and the query of each pair."""
    diffs, owner = [], []
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        for i in rows:
            for j in rows:
                if y[i] > y[j]:
                    diffs.append(X[i] - X[j])
                    owner.append(g)
    return np.array(diffs), np.array(owner)


def test_loss_and_gradient_are_those_of_the_explicit_pairs():
    rng = np.random.default_rng(0)
    sizes = rng.integers(0, 30, 20)
    offsets = np.r_[0, np.cumsum(sizes)]
    scores = rng.normal(scale=1.5, size=offsets[-1])
    scores[5] = scores[6] + 1.0  # a margin of exactly 1
    levels = rng.integers(0, 4, offsets[-1])
    loss, grad, pairs = pairwise_squared_hinge(scores, levels, offsets)
    ref_loss, ref_grad, ref_pairs = 0.0, np.zeros_like(scores), np.zeros(sizes.size, int)
    for q in range(sizes.size):
        for i in range(offsets[q], offsets[q + 1]):
            for j in range(offsets[q], offsets[q + 1]):
                if levels[i] > levels[j]:
                    ref_pairs[q] += 1
                    slack = max(0.0, 1.0 - scores[i] + scores[j])
                    ref_loss += slack**2
                    ref_grad[i] -= 2 * slack
                    ref_grad[j] += 2 * slack
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(pairs, ref_pairs)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("C", [0.1, 10.0])
def test_fit_is_linearsvc_on_the_explicit_pairs(C, sparse):
    X, y, groups = graded(1)
    diffs, owner = explicit_pairs(X, y, groups)
    # gtol 1e-7: within reach of the objective's rounding (at 1e-10 L-BFGS-B's line search
    # gave up near a gradient of 5e-8 on the sparse products, reported as not converged)
    model = PairwiseRankSVM(C=C, tol=1e-7, max_iter=5000).fit(
        sp.csr_matrix(X) if sparse else X, y, groups
    )
    Q = np.unique(owner).size
    assert model.n_queries_ == Q and model.n_pairs_ == len(diffs)
    # LinearSVC needs two classes: flip every other pair, which leaves its hinge unchanged
    sign = np.where(np.arange(len(diffs)) % 2 == 0, 1.0, -1.0)
    svc = LinearSVC(
        C=C / Q, loss="squared_hinge", dual=False, fit_intercept=False, tol=1e-12, max_iter=100_000
    ).fit(diffs * sign[:, None], sign)
    np.testing.assert_allclose(model.coef_, svc.coef_, rtol=1e-5, atol=1e-7)

    def primal(w):
        return 0.5 * w @ w + C / Q * np.sum(np.maximum(0.0, 1.0 - diffs @ w) ** 2)

    assert model.objective_ == pytest.approx(primal(model.coef_[0]), rel=1e-10)
    assert model.objective_ == pytest.approx(primal(svc.coef_[0]), rel=1e-7)
    assert model.converged_


def test_queries_need_not_be_contiguous():
    X, y, groups = graded(2)
    order = np.random.default_rng(3).permutation(y.size)
    a = PairwiseRankSVM(tol=1e-10).fit(X, y, groups)
    b = PairwiseRankSVM(tol=1e-10).fit(X[order], y[order], groups[order])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-9)


def test_score_is_mean_ndcg_and_ranks_better_than_chance():
    X, y, groups = graded(4, n_queries=40)
    model = PairwiseRankSVM(C=1.0).fit(X, y, groups)
    rng = np.random.default_rng(5)
    chance = PairwiseRankSVM().fit(X, y, groups)
    chance.coef_ = rng.normal(size=(1, X.shape[1]))
    assert model.score(X, y, groups) > chance.score(X, y, groups)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"C": 0}, "C must be"),
        ({"tol": -1.0}, "tol must be"),
        ({"max_iter": 0}, "max_iter"),
    ],
)
def test_bad_parameters_are_refused(params, match):
    X, y, groups = graded(6)
    with pytest.raises(ValueError, match=match):
        PairwiseRankSVM(**params).fit(X, y, groups)


def test_no_pair_is_refused():
    X, _, groups = graded(7)
    with pytest.raises(ValueError, match="nothing to rank"):
        PairwiseRankSVM().fit(X, np.ones(len(X)), groups)
    with pytest.raises(ValueError, match="one query id per sample"):
        PairwiseRankSVM().fit(X, np.ones(len(X)), groups[:-1])
