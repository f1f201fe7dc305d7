"""RankSVM: scikit-learn's estimator checks, cross-validation, dense and sparse input, LAI
methods giving the same model, the 0-1 loss against LinearSVC, label mapping, the intercept,
the LAI record, and bad input."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import average_precision_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold, train_test_split
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from qs.estimators import RankSVM, append_ones
from qs.inference import lai
from qs.metrics import average_precision, ndcg


def make_data(n=160, d=8, seed=0, pos_rate=0.3, signal=1.0):
    """Gaussian features with a class signal along one random direction; y is bool."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < pos_rate
    y[:2] = [True, False]
    X = rng.normal(size=(n, d)) + signal * y[:, None] * rng.normal(size=d)
    return X, y


# ---------------------------------------------------------------- scikit-learn conventions


@parametrize_with_checks(
    [
        RankSVM(max_iter=50),
        RankSVM(loss="ndcg", max_iter=50),
        RankSVM(loss="01", max_iter=50),
        RankSVM(solver="frank_wolfe", max_iter=50),
        RankSVM(solver="subgradient", max_iter=50),
    ]
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_grid_search_cv_scores_are_the_estimators_own():
    # GridSearchCV (5-fold, as the paper picks C) reports for each C the mean test AP of
    # the folds, which must be what fitting and scoring RankSVM by hand gives
    X, y = make_data(n=150, seed=5)
    grid = [0.1, 10.0]
    search = GridSearchCV(RankSVM(tol=1e-4), {"C": grid}, cv=5).fit(X, y)
    folds = list(StratifiedKFold(5).split(X, y))
    for C, got in zip(grid, search.cv_results_["mean_test_score"]):
        by_hand = [RankSVM(C=C, tol=1e-4).fit(X[tr], y[tr]).score(X[te], y[te]) for tr, te in folds]
        assert got == pytest.approx(np.mean(by_hand), rel=1e-12)
    assert search.best_params_["C"] == grid[int(np.argmax(search.cv_results_["mean_test_score"]))]
    np.testing.assert_array_equal(
        search.best_estimator_.coef_, RankSVM(C=search.best_params_["C"], tol=1e-4).fit(X, y).coef_
    )


# ---------------------------------------------------------------- same model, other routes


@pytest.mark.parametrize("loss", ["ap", "ndcg", "01"])
def test_dense_and_sparse_give_the_same_model(loss):
    X, y = make_data(seed=2)
    X[np.abs(X) < 0.8] = 0.0
    dense = RankSVM(loss=loss, C=5.0, tol=1e-4).fit(X, y)
    sparse = RankSVM(loss=loss, C=5.0, tol=1e-4).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(sparse.intercept_, dense.intercept_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(
        sparse.decision_function(sp.csc_matrix(X)), dense.decision_function(X), rtol=1e-7, atol=1e-9
    )


@pytest.mark.parametrize(
    "loss,methods",
    [("ap", ["qs", "yue", "search", "auto"]), ("ndcg", ["qs", "chakrabarti", "auto"])],
)
def test_inference_methods_give_the_same_model(loss, methods):
    X, y = make_data(seed=1)
    fits = [RankSVM(loss=loss, inference=m, C=10.0, tol=1e-5).fit(X, y) for m in methods]
    for fit in fits[1:]:
        np.testing.assert_allclose(fit.coef_, fits[0].coef_, rtol=1e-9, atol=1e-12)
        assert fit.n_iter_ == fits[0].n_iter_


def test_labels_map_to_classes_with_the_larger_one_positive():
    X, y = make_data(seed=3)
    ref = RankSVM(tol=1e-4).fit(X, y)
    for neg, pos in [(0, 1), (-1, 1), (3, 7), ("cat", "dog")]:
        labels = np.where(y, pos, neg)
        est = RankSVM(tol=1e-4).fit(X, labels)
        np.testing.assert_array_equal(est.classes_, [neg, pos])
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-12)
        np.testing.assert_array_equal(est.predict(X), np.where(ref.predict(X), pos, neg))
    # the larger label is positive even where it is the rarer one
    flipped = RankSVM(tol=1e-4).fit(X, np.where(y, 0, 1))
    assert ref.score(X, y) > 0.8 and flipped.score(X, ~y) > 0.8
    assert np.corrcoef(flipped.decision_function(X), ref.decision_function(X))[0, 1] < -0.9


def test_random_state_is_stored_and_changes_nothing():
    X, y = make_data(seed=4)
    a = RankSVM(random_state=0).fit(X, y)
    b = RankSVM(random_state=np.random.RandomState(7)).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)


# ---------------------------------------------------------------- 0-1 loss and LinearSVC


def test_zero_one_svm_matches_linear_svc_with_hinge():
    # same problem: 1/2 |(w, b)|^2 + C_svc * sum(hinge), with RankSVM's C = C_svc * n and the
    # bias a constant feature 1 (liblinear's intercept_scaling=1)
    X, y = make_data(n=200, seed=6)
    C_svc = 0.05
    svc = LinearSVC(loss="hinge", C=C_svc, tol=1e-10, max_iter=100_000).fit(X, y)
    est = RankSVM(loss="01", C=C_svc * X.shape[0], tol=1e-7).fit(X, y)
    assert est.converged_
    np.testing.assert_allclose(est.coef_, svc.coef_, rtol=1e-2, atol=1e-3 * np.abs(svc.coef_).max())
    np.testing.assert_allclose(est.intercept_, svc.intercept_, rtol=1e-2, atol=1e-3)


def test_zero_one_svm_test_ap_close_to_linear_svc():
    X, y = make_data(n=600, d=10, seed=7, signal=0.7)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, stratify=y, random_state=0)
    ours = RankSVM(loss="01", C=10.0).fit(Xtr, ytr).score(Xte, yte)
    svc = average_precision_score(yte, LinearSVC().fit(Xtr, ytr).decision_function(Xte))
    chance = yte.mean()
    assert ours > chance + 0.3 and svc > chance + 0.3
    assert ours == pytest.approx(svc, abs=0.03)


# ---------------------------------------------------------------- fitted attributes


@pytest.mark.parametrize(
    "solver,calls_per_iter", [("cutting_plane", 1), ("frank_wolfe", 1), ("subgradient", 2)]
)
def test_lai_record_is_consistent(solver, calls_per_iter):
    X, y = make_data(seed=8)
    est = RankSVM(solver=solver, C=3.0, max_iter=40).fit(X, y)
    assert est.lai_calls_ == est.lai_times_.size == calls_per_iter * est.n_iter_
    assert est.objective_curve_.shape == est.gap_curve_.shape == (est.n_iter_,)
    assert np.all(est.lai_times_ > 0)
    assert est.lai_time_ == pytest.approx(est.lai_times_.sum(), rel=1e-12)
    assert est.lai_time_per_call_ == pytest.approx(est.lai_time_ / est.lai_calls_, rel=1e-12)
    assert est.lai_compile_time_ >= 0.0
    # the last recorded objective is that of coef_, recomputed with another LAI method
    w = est.coef_[0]
    res = lai(X @ w, y, loss="ap", method="yue")
    assert est.objective_curve_[-1] == pytest.approx(
        0.5 * w @ w + 3.0 * (res.objective - res.ground_truth_F), rel=1e-10
    )


def test_iteration_cap_is_reported():
    X, y = make_data(seed=8)
    with pytest.warns(
        ConvergenceWarning,
        match=r"cutting_plane stopped at max_iter=3 before "
        r"meeting tol=0 \(duality gap",
    ):
        capped = RankSVM(C=100.0, tol=0.0, max_iter=3).fit(X, y)
    assert capped.n_iter_ == 3 and not capped.converged_
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert RankSVM(C=1.0, tol=1e-3).fit(X, y).converged_


@pytest.mark.parametrize(
    "loss,metric", [("ap", average_precision), ("ndcg", ndcg), ("01", average_precision)]
)
def test_score_is_the_ranking_metric(loss, metric):
    X, y = make_data(seed=9)
    est = RankSVM(loss=loss).fit(X[:100], y[:100])
    s = est.decision_function(X[100:])
    assert est.score(X[100:], y[100:]) == pytest.approx(metric(y[100:], s), rel=1e-12)
    if loss != "ndcg":  # no ties in continuous scores: scikit-learn's AP is the same
        assert est.score(X[100:], y[100:]) == pytest.approx(
            average_precision_score(y[100:], s), rel=1e-12
        )


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_ranking_intercept_makes_the_fewest_training_errors(loss):
    X, y = make_data(seed=10, signal=0.6)
    est = RankSVM(loss=loss).fit(X, y)
    s = X @ est.coef_[0]
    errors = np.count_nonzero(est.predict(X) != y)
    cuts = np.concatenate([[s.max()], (np.sort(s)[1:] + np.sort(s)[:-1]) / 2, [s.min() - 1]])
    best = min(np.count_nonzero((s > t) != y) for t in cuts)
    assert errors == best
    assert 0 < errors < np.count_nonzero(y)  # not a trivial threshold on this data
    plain = RankSVM(loss=loss, fit_intercept=False).fit(X, y)
    np.testing.assert_array_equal(plain.coef_, est.coef_)
    np.testing.assert_array_equal(plain.intercept_, [0.0])
    np.testing.assert_allclose(plain.decision_function(X), s, rtol=1e-12)


def test_zero_one_intercept_is_learnt():
    # one feature in [4, 6], positive above 5: only a bias of about -5 w separates them
    x = np.random.default_rng(0).uniform(4.0, 6.0, size=(200, 1))
    y = x[:, 0] > 5.0
    with_b = RankSVM(loss="01", C=100.0).fit(x, y)
    without = RankSVM(loss="01", C=100.0, fit_intercept=False).fit(x, y)
    assert with_b.intercept_[0] / with_b.coef_[0, 0] == pytest.approx(-5.0, abs=0.2)
    assert np.mean(with_b.predict(x) == y) > 0.9
    assert without.intercept_[0] == 0.0
    assert np.mean(without.predict(x) == y) == pytest.approx(max(y.mean(), 1 - y.mean()))


# ---------------------------------------------------------------- bad input

X_OK, Y_OK = make_data(n=30, d=4)


@pytest.mark.parametrize(
    "params,X,y,match",
    [
        ({}, X_OK, np.ones(30), "only binary|1 class"),
        ({}, X_OK, np.arange(30) % 3, "Only binary classification is supported.*3 class"),
        ({}, np.where(np.eye(30, 4) > 0, np.nan, X_OK), Y_OK, "NaN"),
        ({}, X_OK, np.linspace(0, 1, 30), "Unknown label type"),
        ({"loss": "hinge"}, X_OK, Y_OK, "loss must be one of"),
        (
            {"loss": "01", "inference": "qs"},
            X_OK,
            Y_OK,
            r"inference 'qs' does not apply to loss '01'; methods for it: \['auto', 'zero_one'\]",
        ),
        ({"loss": "ap", "inference": "chakrabarti"}, X_OK, Y_OK, "does not apply to loss 'ap'"),
        ({"solver": "sgd"}, X_OK, Y_OK, "solver must be one of"),
        ({"C": 0.0}, X_OK, Y_OK, "C must be a finite real number > 0"),
        ({"max_iter": 0}, X_OK, Y_OK, "max_iter must be a positive integer"),
    ],
)
def test_bad_fit_input(params, X, y, match):
    with pytest.raises(ValueError, match=match):
        RankSVM(**params).fit(X, y)


def test_fit_intercept_must_be_a_bool():
    with pytest.raises(TypeError, match="fit_intercept must be True or False; got 'yes'"):
        RankSVM(fit_intercept="yes").fit(X_OK, Y_OK)


def test_wrong_number_of_features_at_predict():
    est = RankSVM().fit(X_OK, Y_OK)
    with pytest.raises(ValueError, match="X has 3 features, but RankSVM is expecting 4"):
        est.predict(X_OK[:, :3])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_append_ones_keeps_the_dtype_of_every_layout(dtype):
    rng = np.random.default_rng(0)
    flat = rng.standard_normal((5, 3)).astype(dtype)
    padded = rng.standard_normal((4, 2, 3)).astype(dtype)
    for X in (flat, sp.csr_matrix(flat), padded):
        out = append_ones(X)
        dense = out.toarray() if sp.issparse(out) else out
        assert out.dtype == dtype and dense.shape == X.shape[:-1] + (4,)
        np.testing.assert_array_equal(dense[..., :3], X.toarray() if sp.issparse(X) else X)
        assert (dense[..., 3] == 1).all()
    assert (
        sp.issparse(append_ones(sp.csc_matrix(flat)))
        and append_ones(sp.csc_matrix(flat)).format == "csr"
    )
    da = pytest.importorskip("dask.array")
    lazy = append_ones(da.from_array(padded, chunks=(2, 2, 3)))
    assert lazy.dtype == dtype and lazy.chunks == ((2, 2), (2,), (3, 1))
    np.testing.assert_array_equal(lazy.compute(), append_ones(padded))


def test_lai_callback_records_every_lai_call_of_a_fit():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(80, 4)), np.arange(80) % 4 == 0
    calls = []
    est = RankSVM(loss="ap", C=10.0, lai_callback=lambda s, labels: calls.append(s)).fit(X, y)
    assert len(calls) == est.lai_calls_ > 1
    with pytest.raises(ValueError, match="lai_callback applies to a fit without groups"):
        RankSVM(lai_callback=print).fit(X, y, groups=np.arange(80) // 10)
