"""RankSVM over queries (fit with groups): SVM-map's structured SVM, one example per query."""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import GroupKFold, cross_val_score

from qs.estimators import RankSVM
from qs.inference import lai

SOLVERS = ["cutting_plane", "frank_wolfe", "subgradient", "block_frank_wolfe"]


def letor_like(seed, n_queries=25, d=5, low=4, high=40):
    """Queries of ``low``..``high`` documents, graded labels 0-4, a query-level shift."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(low, high, n_queries)
    groups = np.repeat(np.arange(n_queries) * 7 + 3, sizes)
    X = rng.normal(size=(sizes.sum(), d))
    w = rng.normal(size=d)
    latent = X @ w + np.repeat(rng.normal(size=n_queries), sizes) + rng.normal(size=sizes.sum())
    y = np.digitize(latent, [0.5, 1.5, 2.0, 2.5])  # 0..4
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    y[starts], y[starts + 1] = 0, 2  # every query has a relevant and a non-relevant document
    return X, y, groups


def independent_primal(X, relevant, groups, w, C, loss):
    """1/2 |w|^2 + C/Q sum_q hinge_q, each hinge from lai on the query alone."""
    hinges = []
    for g in np.unique(groups):
        rows = groups == g
        if relevant[rows].all() or not relevant[rows].any():
            continue
        res = lai(X[rows] @ w, relevant[rows], loss, "qs")
        hinges.append(res.objective - res.ground_truth_F)
    return 0.5 * w @ w + C * np.mean(hinges)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("solver", ["cutting_plane", "frank_wolfe", "subgradient"])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_one_group_is_the_plain_fit(loss, solver):
    X, y, _ = letor_like(0)
    y = y > 0
    plain = RankSVM(loss=loss, solver=solver, C=5.0, max_iter=60).fit(X, y)
    grouped = RankSVM(loss=loss, solver=solver, C=5.0, max_iter=60).fit(
        X, y.astype(int), groups=np.zeros(y.size)
    )
    np.testing.assert_allclose(grouped.coef_, plain.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grouped.objective_curve_, plain.objective_curve_, rtol=1e-9)
    assert grouped.n_queries_ == 1 and grouped.n_queries_skipped_ == 0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_recorded_primal_matches_an_independent_computation(loss, solver):
    X, y, groups = letor_like(1)
    C = 20.0
    est = RankSVM(loss=loss, solver=solver, C=C, tol=1e-4, max_iter=300).fit(X, y, groups)
    assert est.solver_ == solver and est.relevance_threshold_ == 0.0
    ref = independent_primal(X, y > 0, groups, est.coef_[0], C, loss)
    assert est.objective_curve_[-1] == pytest.approx(ref, rel=1e-10)
    assert est.lai_calls_ >= est.n_iter_ and np.all(est.lai_times_ > 0)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_solvers_reach_the_same_optimum(loss):
    """The duality gap bounds each primal's distance to the optimum: every solver's final
    primal lies within its gap of the others' (block-coordinate Frank-Wolfe included)."""
    X, y, groups = letor_like(2)
    fits = {
        s: RankSVM(loss=loss, solver=s, C=10.0, tol=1e-4, max_iter=2000).fit(X, y, groups)
        for s in ["cutting_plane", "block_frank_wolfe", "frank_wolfe"]
    }
    low = max(f.objective_curve_[-1] - f.gap_curve_[-1] for f in fits.values())
    for f in fits.values():
        assert f.converged_ and f.objective_curve_[-1] >= low - 1e-9
    assert RankSVM(loss=loss, C=10.0).fit(X, y, groups).solver_ == "block_frank_wolfe"


def test_groups_in_any_order_give_the_same_model():
    X, y, groups = letor_like(3)
    order = np.random.default_rng(0).permutation(y.size)
    a = RankSVM(solver="cutting_plane", C=10.0, tol=1e-6).fit(X, y, groups)
    b = RankSVM(solver="cutting_plane", C=10.0, tol=1e-6).fit(X[order], y[order], groups[order])
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-6, atol=1e-9)


def test_queries_without_both_kinds_are_counted_warned_once_and_add_nothing():
    X, y, groups = letor_like(4)
    ids = np.unique(groups)
    y = y.copy()
    y[groups == ids[0]] = 0  # nothing relevant
    y[groups == ids[1]] = 3  # nothing non-relevant
    extra = np.arange(5) + 1000  # queries of one document each
    X2 = np.vstack([X, np.random.default_rng(1).normal(size=(5, X.shape[1]))])
    y2, groups2 = np.r_[y, [2, 0, 1, 0, 4]], np.r_[groups, extra]
    with pytest.warns(
        UserWarning, match="^7 of 30 queries have no relevant or no non-relevant document"
    ) as record:
        est = RankSVM(solver="cutting_plane", C=10.0, tol=1e-6).fit(X2, y2, groups2)
    assert len([r for r in record if "queries have" in str(r.message)]) == 1
    assert est.n_queries_ == 23 and est.n_queries_skipped_ == 7
    keep = ~np.isin(groups, ids[:2])
    ref = RankSVM(solver="cutting_plane", C=10.0, tol=1e-6).fit(X[keep], y[keep], groups[keep])
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match="no query has both a relevant and a non-relevant"):
        RankSVM().fit(X, y, groups=np.arange(y.size))  # one document per query


def test_relevance_threshold_makes_grades_binary():
    X, y, groups = letor_like(5)
    est = RankSVM(solver="cutting_plane", relevance_threshold=1, tol=1e-6).fit(X, y, groups)
    ref = RankSVM(solver="cutting_plane", tol=1e-6).fit(X, (y > 1).astype(int), groups)
    assert est.relevance_threshold_ == 1
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-9)
    np.testing.assert_array_equal(est.classes_, [0, 1])
    assert est.score(X, y) == pytest.approx(ref.score(X, (y > 1).astype(int)), rel=1e-12)


def test_group_cross_validation():
    """GroupKFold splits by query; the groups reach fit through ``params``."""
    X, y, groups = letor_like(6, n_queries=12)
    scores = cross_val_score(
        RankSVM(C=10.0), X, y, groups=groups, cv=GroupKFold(3), params={"groups": groups}
    )
    assert scores.shape == (3,) and np.all(scores > 0.5)


@pytest.mark.parametrize(
    "params,kwargs,match",
    [
        ({"loss": "01"}, {}, "loss '01' has no queries"),
        ({}, {"groups": np.zeros(3)}, "one query id per sample"),
        ({"relevance_threshold": "high"}, {}, "relevance_threshold must be None or a finite"),
        ({"relevance_threshold": np.nan}, {}, "relevance_threshold must be None or a finite"),
        ({"solver": "bogus"}, {}, "solver must be one of"),
    ],
)
def test_bad_input_over_queries(params, kwargs, match):
    X, y, groups = letor_like(7, n_queries=4)
    kwargs = {"groups": groups, **kwargs}
    with pytest.raises(ValueError, match=match):
        RankSVM(**params).fit(X, y, **kwargs)


def test_block_frank_wolfe_takes_dense_features_only():
    import scipy.sparse as sp

    X, y, groups = letor_like(8, n_queries=4)
    with pytest.raises(ValueError, match="block_frank_wolfe takes a dense X"):
        RankSVM(solver="block_frank_wolfe").fit(sp.csr_matrix(X), y, groups)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = RankSVM().fit(sp.csr_matrix(X), y, groups)
    assert est.solver_ == "cutting_plane"


def test_float32_features_train_without_a_float64_copy():
    """Over queries a float32 X is read in place (the problem holds the caller's array),
    its scores and joint feature map summed in float64: the model is the float64 fit's."""
    from qs.ssvm.queries import QueryProblem, query_offsets, query_scores, query_transposed

    X, y, groups = letor_like(21, d=11)
    X32 = X.astype(np.float32)
    _, offsets = query_offsets(groups)
    prob = QueryProblem(
        X32, y > 0, offsets, C=1.0, loss="ap", method="auto", tol=1e-3, max_iter=5, callback=None
    )
    assert prob.X.dtype == np.float32 and np.shares_memory(prob.X, X32)
    w = np.random.default_rng(0).normal(size=11)
    wide = X32.astype(np.float64)
    np.testing.assert_allclose(query_scores(X32, w), wide @ w, rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(1).normal(size=y.size)
    np.testing.assert_allclose(query_transposed(X32, g), wide.T @ g, rtol=1e-12, atol=1e-12)
    fit32 = RankSVM(C=1.0).fit(X32, y, groups)
    fit64 = RankSVM(C=1.0).fit(wide, y, groups)
    np.testing.assert_allclose(fit32.coef_, fit64.coef_, rtol=1e-8, atol=1e-10)
