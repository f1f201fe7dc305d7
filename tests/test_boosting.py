"""qs.boosting: the exact AP/NDCG structured hinge as LightGBM's and XGBoost's custom objective."""

import numpy as np
import pytest

from qs.boosting import hinge_gradient, lightgbm_objective, xgboost_objective
from qs.inference import lai
from qs.metrics import mean_average_precision


def ragged(seed, n_queries=12, low=2, high=30):
    """Graded labels 0-4 over ragged queries, some queries all relevant or all not."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(low, high, n_queries)
    offsets = np.r_[0, np.cumsum(sizes)]
    labels = rng.choice(5, size=offsets[-1], p=[0.5, 0.2, 0.15, 0.1, 0.05])
    labels[offsets[1] : offsets[2]] = 0  # a query without a relevant document
    labels[offsets[2] : offsets[3]] = 3  # and one without a non-relevant one
    return rng.normal(size=offsets[-1]), labels, offsets


@pytest.mark.parametrize("threshold", [0, 1.5])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_gradient_is_each_querys_lai_gradient(loss, threshold):
    scores, labels, offsets = ragged(0)
    res = hinge_gradient(scores, labels, offsets, loss=loss, relevance_threshold=threshold)
    for q in range(offsets.size - 1):
        rows = slice(offsets[q], offsets[q + 1])
        relevant = labels[rows] > threshold
        if relevant.all() or not relevant.any():
            assert not res.valid[q] and res.hinge[q] == 0
            np.testing.assert_array_equal(res.grad[rows], 0.0)
            continue
        one = lai(scores[rows], relevant, loss, "qs")
        truth = np.where(relevant, 1 / relevant.sum(), -1 / (~relevant).sum())
        np.testing.assert_allclose(res.grad[rows], one.coef - truth, rtol=1e-12, atol=1e-15)
        assert res.hinge[q] == pytest.approx(one.objective - one.ground_truth_F, rel=1e-12)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_gradient_is_the_hinges_derivative(loss):
    """Away from ties the summed hinge is linear near the scores: central differences of it
    (each hinge from lai alone) give the gradient."""
    scores, labels, offsets = ragged(1)

    def total(s):
        out = 0.0
        for q in range(offsets.size - 1):
            relevant = labels[offsets[q] : offsets[q + 1]] > 0
            if relevant.any() and not relevant.all():
                one = lai(s[offsets[q] : offsets[q + 1]], relevant, loss, "qs")
                out += one.objective - one.ground_truth_F
        return out

    grad = hinge_gradient(scores, labels, offsets, loss=loss).grad
    eps = 1e-7
    for k in np.random.default_rng(2).choice(scores.size, 25, replace=False):
        step = np.zeros_like(scores)
        step[k] = eps
        assert (total(scores + step) - total(scores - step)) / (2 * eps) == pytest.approx(
            grad[k], abs=1e-6
        )


def test_balanced_hessian_bounds_the_newton_step():
    scores, labels, offsets = ragged(3)
    res = hinge_gradient(scores, labels, offsets)
    q = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    relevant = labels > 0
    P = np.bincount(q, weights=relevant)[q]
    N = np.diff(offsets)[q] - P
    own = np.where(relevant, P, N)  # 0 only in queries that do not train
    expected = 1 / np.where(res.valid[q], own, np.diff(offsets)[q])
    np.testing.assert_allclose(res.hess, expected)
    assert np.all(np.abs(res.grad) <= 2 * res.hess + 1e-12)
    fixed = hinge_gradient(scores, labels, offsets, hessian=0.5)
    np.testing.assert_array_equal(fixed.hess, 0.5)
    np.testing.assert_array_equal(fixed.grad, res.grad)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"hessian": 0}, "hessian must be"),
        ({"hessian": "newton"}, "hessian must be"),
        ({"relevance_threshold": np.nan}, "relevance_threshold"),
        ({"loss": "01"}, "loss"),
    ],
)
def test_bad_options_are_refused(kwargs, match):
    scores, labels, offsets = ragged(4)
    with pytest.raises(ValueError, match=match):
        hinge_gradient(scores, labels, offsets, **kwargs)


def test_bad_loss_is_refused_when_the_objective_is_made():
    for make in (lightgbm_objective, xgboost_objective):
        with pytest.raises(ValueError, match="loss must be one of"):
            make("map")


def ltr_data(seed, n_queries=60, d=6):
    """Queries of 10-30 documents whose grades follow a linear score plus noise."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(10, 30, n_queries)
    groups = np.repeat(np.arange(n_queries), sizes)
    X = rng.normal(size=(sizes.sum(), d))
    latent = X @ rng.normal(size=d) + 0.5 * rng.normal(size=sizes.sum())
    y = np.digitize(latent, [1.0, 2.0, 3.0])
    return X, y, groups, sizes


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_lightgbm_trains_with_the_objective(loss):
    lgb = pytest.importorskip("lightgbm")
    X, y, groups, sizes = ltr_data(5)
    data = lgb.Dataset(X, y, group=sizes)
    params = {
        "objective": lightgbm_objective(loss),
        "learning_rate": 0.3,
        "num_leaves": 7,
        "min_data_in_leaf": 5,
        "verbose": -1,
        "seed": 0,
        "num_threads": 1,
    }
    booster = lgb.train(params, data, num_boost_round=20)
    start = mean_average_precision(y, np.zeros(y.size), groups)  # boosting starts constant
    trained = mean_average_precision(y, booster.predict(X), groups)
    assert trained > start + 0.2
    # the objective's own view: the summed hinge went down
    offsets = np.r_[0, np.cumsum(sizes)]
    before = hinge_gradient(np.zeros(y.size), y, offsets, loss=loss).hinge.sum()
    after = hinge_gradient(booster.predict(X), y, offsets, loss=loss).hinge.sum()
    assert after < before


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_xgboost_trains_with_the_objective(loss):
    xgb = pytest.importorskip("xgboost")
    X, y, groups, sizes = ltr_data(6)
    dtrain = xgb.DMatrix(X, y, qid=groups)
    params = {
        "learning_rate": 0.3,
        "max_depth": 3,
        "min_child_weight": 0.0,
        "seed": 0,
        "nthread": 1,
        "base_score": 0.0,
    }
    booster = xgb.train(params, dtrain, num_boost_round=20, obj=xgboost_objective(loss))
    start = mean_average_precision(y, np.zeros(y.size), groups)
    trained = mean_average_precision(y, booster.predict(dtrain), groups)
    assert trained > start + 0.2
    offsets = np.r_[0, np.cumsum(sizes)]
    before = hinge_gradient(np.zeros(y.size), y, offsets, loss=loss).hinge.sum()
    after = hinge_gradient(booster.predict(dtrain), y, offsets, loss=loss).hinge.sum()
    assert after < before


def test_objectives_need_the_queries():
    lgb = pytest.importorskip("lightgbm")
    X, y, _, _ = ltr_data(7)
    data = lgb.Dataset(X, y)
    with pytest.raises(ValueError, match="group="):
        lgb.train({"objective": lightgbm_objective(), "verbose": -1}, data, num_boost_round=1)
