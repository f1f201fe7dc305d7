"""Structured SVM solvers: recorded objectives against independent computations, the three
solvers against each other, LAI methods and dense/sparse input giving the same weights, the
0-1 loss against scikit-learn's LinearSVC, and bad input."""

import importlib

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.svm import LinearSVC

from qs.inference import Workspace, lai
from qs.ssvm import (
    SOLVERS,
    Progress,
    cutting_plane,
    frank_wolfe,
    ground_truth_coef,
    subgradient,
)
from qs.ssvm._problem import Problem
from tests import naive

# the modules (qs.ssvm exports functions of the same names)
cp_module = importlib.import_module("qs.ssvm.cutting_plane")
problem_module = importlib.import_module("qs.ssvm._problem")

LOSSES = [("ap", "qs"), ("ndcg", "qs"), ("01", "zero_one")]


def make_data(n=120, d=10, seed=0, pos_rate=0.3):
    """Gaussian features with a class signal along one random direction."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < pos_rate
    y[:2] = [True, False]
    X = rng.normal(size=(n, d)) + 0.8 * y[:, None] * rng.normal(size=d)
    return X, y


def slack(X, y, w, loss):
    """xi(w) recomputed without the solvers: from the hinge's definition for "01", else by a
    different LAI method (bucket) than the solvers use (qs)."""
    s = X @ w
    if loss == "01":
        return np.maximum(0.0, 1.0 - np.where(y, 1.0, -1.0) * s).mean()
    res = lai(s, y, loss=loss, method="bucket")
    return res.objective - res.ground_truth_F


def run(solver, X, y, **kw):
    kw.setdefault("max_iter", 3000)
    return solver(X, y, **kw)


# ---------------------------------------------------------------- (a) recorded objective


@pytest.mark.parametrize("solver", SOLVERS.values())
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_objective_matches_exhaustive_enumeration(solver, loss):
    # n = 7: xi = max over all 7! orderings of Delta + F, minus F(R*)
    X, y = make_data(n=7, d=3, seed=3, pos_rate=0.4)
    res = run(solver, X, y, C=5.0, loss=loss, method="qs", tol=1e-6, max_iter=200)
    s = X @ res.w
    xi = naive.best_objective(s, y, loss) - (s[y].mean() - s[~y].mean())
    assert res.objective[-1] == pytest.approx(0.5 * res.w @ res.w + 5.0 * xi, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("solver", SOLVERS.values())
@pytest.mark.parametrize("loss,method", LOSSES)
def test_objective_matches_recomputation(solver, loss, method):
    X, y = make_data()
    res = run(solver, X, y, C=2.0, loss=loss, method=method, tol=1e-4)
    expected = 0.5 * res.w @ res.w + 2.0 * slack(X, y, res.w, loss)
    assert res.objective[-1] == pytest.approx(expected, rel=1e-10)


def test_ground_truth_coef():
    y = np.array([True, False, False, True, False])
    np.testing.assert_allclose(ground_truth_coef(y, "ap"), [0.5, -1 / 3, -1 / 3, 0.5, -1 / 3])
    np.testing.assert_allclose(ground_truth_coef(y, "01"), [0.1, -0.1, -0.1, 0.1, -0.1])
    # Psi(X, R*) . w equals lai's ground_truth_F at scores X w
    s = np.arange(5.0)
    assert ground_truth_coef(y, "ndcg") @ s == pytest.approx(lai(s, y, "ndcg").ground_truth_F)
    assert ground_truth_coef(y, "01") @ s == pytest.approx(lai(s, y, "01").ground_truth_F)


# ---------------------------------------------------------------- (b) convergence


@pytest.mark.parametrize("loss,method", LOSSES)
@pytest.mark.parametrize("C", [1.0, 20.0])
def test_solvers_reach_the_same_optimum(loss, method, C):
    X, y = make_data()
    tol = 1e-4
    cp = run(cutting_plane, X, y, C=C, loss=loss, method=method, tol=tol)
    assert cp.converged
    assert 0.0 <= cp.gap[-1] <= C * tol * 1.01
    fw = run(frank_wolfe, X, y, C=C, loss=loss, method=method, tol=tol, max_iter=5000)
    sg = run(subgradient, X, y, C=C, loss=loss, method=method, tol=tol, max_iter=2000)
    assert fw.converged and fw.gap[-1] <= C * tol
    optimum = cp.objective[-1]
    for res in (fw, sg):
        assert res.objective[-1] == pytest.approx(optimum, rel=2e-3)
    # weak duality: every dual value (objective - gap) is below every primal value
    best_primal = min(r.objective.min() for r in (cp, fw, sg))
    for res in (cp, fw, sg):
        assert np.all(res.gap >= -1e-9 * C)
        assert np.max(res.objective - res.gap) <= best_primal + 1e-9 * C


def test_iteration_cap_and_record():
    X, y = make_data()
    seen = []
    res = cutting_plane(X, y, C=50.0, tol=0.0, max_iter=4, callback=seen.append)
    assert not res.converged and res.n_iter == 4
    assert res.objective.shape == res.gap.shape == (4,)
    assert [p[:3] for p in seen] == [
        Progress(k + 1, res.objective[k], res.gap[k])[:3] for k in range(4)
    ]
    np.testing.assert_array_equal(seen[0].scores, np.zeros(len(y)))  # w = 0 at the start
    assert all(p.scores.shape == (len(y),) for p in seen)
    np.testing.assert_allclose(seen[-1].scores, X @ res.w)  # the last iterate is returned
    assert res.lai_calls == 4 and res.lai_time == pytest.approx(res.lai_times.sum())
    assert res.lai_time_per_call == pytest.approx(res.lai_time / 4)
    sg = subgradient(X, y, C=50.0, tol=0.0, max_iter=5)
    assert sg.lai_calls == 10 and sg.n_iter == 5  # a step and an evaluation per iteration


@pytest.mark.parametrize("solver", SOLVERS.values())
def test_deterministic(solver):
    X, y = make_data()
    a, b = (run(solver, X, y, C=3.0, tol=1e-3) for _ in range(2))
    np.testing.assert_array_equal(a.w, b.w)
    np.testing.assert_array_equal(a.objective, b.objective)


def test_stochastic_subgradient_repeats_for_a_seed_and_learns():
    X, y = make_data()
    kw = {"C": 3.0, "max_iter": 60, "batch_size": 40}
    a, b = (subgradient(X, y, random_state=7, **kw) for _ in range(2))
    c = subgradient(X, y, random_state=8, **kw)
    np.testing.assert_array_equal(a.w, b.w)
    assert not np.array_equal(a.w, c.w)
    assert np.isnan(a.gap).all() and a.n_iter == 60 and not a.converged
    # the stochastic steps still descend: the primal ends near the full-batch optimum
    best = cutting_plane(X, y, C=3.0, tol=1e-6).objective[-1]
    assert a.objective[-1] < a.objective[0] and a.objective[-1] <= 1.5 * best
    with pytest.raises(ValueError, match="batch_size"):
        subgradient(X, y, batch_size=1)


@pytest.mark.parametrize("backend", ["daqp", "quadprog", "piqp", "clarabel"])
def test_qp_backends_agree(backend):
    pytest.importorskip(backend)
    X, y = make_data()
    ref = cutting_plane(X, y, C=10.0, tol=1e-5)
    res = cutting_plane(X, y, C=10.0, tol=1e-5, qp_solver=backend)
    assert res.converged
    assert res.objective[-1] == pytest.approx(ref.objective[-1], rel=1e-5)


# ---------------------------------------------------------------- (c), (d) same weights


@pytest.mark.parametrize("solver", SOLVERS.values())
def test_lai_methods_give_identical_weights(solver):
    X, y = make_data(seed=1)
    ws = [
        run(solver, X, y, C=10.0, loss="ap", method=m, tol=1e-4, max_iter=500).w
        for m in ("qs", "yue", "search")
    ]
    np.testing.assert_array_equal(ws[0], ws[1])
    np.testing.assert_array_equal(ws[0], ws[2])


@pytest.mark.parametrize("solver", SOLVERS.values())
@pytest.mark.parametrize("loss,method", LOSSES)
def test_dense_and_sparse_agree(solver, loss, method):
    X, y = make_data(seed=2)
    X[np.abs(X) < 0.8] = 0.0  # about half the entries
    dense = run(solver, X, y, C=5.0, loss=loss, method=method, tol=1e-4, max_iter=500)
    sparse = run(
        solver, sp.csr_matrix(X), y, C=5.0, loss=loss, method=method, tol=1e-4, max_iter=500
    )
    np.testing.assert_allclose(sparse.w, dense.w, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(sparse.objective, dense.objective, rtol=1e-8)


# ---------------------------------------------------------------- (e) 0-1 loss = hinge SVM


@pytest.mark.parametrize("C_svc", [0.01, 1.0])
def test_zero_one_matches_linear_svc(C_svc):
    # LinearSVC: 1/2 |w|^2 + C_svc * sum(hinge); ours: 1/2 |w|^2 + C * mean(hinge)
    X, y = make_data(n=150, seed=4)
    n = X.shape[0]
    svc = LinearSVC(loss="hinge", fit_intercept=False, C=C_svc, tol=1e-10, max_iter=100_000)
    w_svc = svc.fit(X, y).coef_.ravel()
    res = cutting_plane(X, y, C=C_svc * n, loss="01", tol=1e-7)

    def objective(w):
        return 0.5 * w @ w + C_svc * np.maximum(0.0, 1.0 - np.where(y, 1, -1) * (X @ w)).sum()

    assert res.objective[-1] == pytest.approx(objective(res.w), rel=1e-10)
    assert res.objective[-1] == pytest.approx(objective(w_svc), rel=1e-5)
    np.testing.assert_allclose(res.w, w_svc, rtol=1e-2, atol=1e-3 * np.abs(w_svc).max())
    np.testing.assert_array_equal(np.argsort(X @ res.w)[-20:], np.argsort(X @ w_svc)[-20:])


# ---------------------------------------------------------------- (f) bad input

X_OK, Y_OK = make_data(n=20, d=3)


@pytest.mark.parametrize("solver", SOLVERS.values())
@pytest.mark.parametrize(
    "X,y,kw,match",
    [
        (X_OK[:, 0], Y_OK, {}, "Expected 2D array"),
        (np.where(np.eye(20, 3) > 0, np.nan, X_OK), Y_OK, {}, "NaN"),
        (X_OK, Y_OK[:-1], {}, "same length"),
        (X_OK, np.where(Y_OK, 2, 0), {}, "binary"),
        (X_OK, np.ones(20, dtype=bool), {}, "no negative"),
        (X_OK, Y_OK, {"C": 0.0}, "C must be"),
        (X_OK, Y_OK, {"C": np.inf}, "C must be"),
        (X_OK, Y_OK, {"tol": -1.0}, "tol must be"),
        (X_OK, Y_OK, {"max_iter": 0}, "max_iter must be"),
        (X_OK, Y_OK, {"loss": "hinge"}, "loss must be"),
        (X_OK, Y_OK, {"loss": "01", "method": "qs"}, "does not support"),
        (X_OK, Y_OK, {"method": "fast"}, "Unknown method"),
        (X_OK, Y_OK, {"callback": 3}, "callback must be"),
    ],
)
def test_bad_input(solver, X, y, kw, match):
    with pytest.raises(ValueError, match=match):
        solver(X, y, **kw)


def test_unknown_qp_backend():
    with pytest.raises(ValueError, match="qp_solver 'gurobi' is not available"):
        cutting_plane(X_OK, Y_OK, qp_solver="gurobi")


def test_working_set_larger_than_the_features():
    # 2 features far from the origin: the working set's Gram matrix turns singular after a
    # few constraints, where daqp needs a definite one; the solver must still converge, to
    # the optimum that Frank-Wolfe (no QP) approaches
    rng = np.random.RandomState(0)
    X = rng.normal(loc=100, size=(100, 2))
    y = rng.randint(0, 2, 100) == 1
    train = rng.permutation(100)[20:]
    X, y = X[train], y[train]
    res = cutting_plane(X, y, loss="ndcg", C=1.0, max_iter=50, tol=1e-6, qp_solver="daqp")
    ref = frank_wolfe(X, y, loss="ndcg", C=1.0, max_iter=20000, tol=1e-7)
    assert res.converged
    assert res.objective[-1] == pytest.approx(ref.objective[-1], rel=1e-3)


def test_identical_features_give_zero_weights():
    """Every sample with the same features: each constraint's a is 0 up to rounding (1e-16,
    Gram 1e-32), where a ridge relative to the Gram matrix alone left daqp a nearly linear QP
    that it failed on. w = 0 is the optimum (no w changes any score difference)."""
    from qs.estimators import RankSVM

    X, y = np.ones((4, 1)), np.array([1, 0, 1, 1])
    res = cutting_plane(X, y, loss="ap")
    assert res.converged and np.abs(res.w).max() < 1e-12
    assert np.abs(RankSVM(loss="ap").fit(X, y).coef_).max() < 1e-12


# ---------------------------------------------------------------- working set and buffers


def test_working_set_grows_in_place_past_its_capacity():
    rng = np.random.default_rng(11)
    ws = cp_module.Constraints(5, 2)
    rows = rng.standard_normal((9, 5))
    for i, a in enumerate(rows):
        ws.add(a, float(i), i)
    A, b = ws.rows()
    np.testing.assert_array_equal(A, rows)
    np.testing.assert_array_equal(b, np.arange(9.0))
    np.testing.assert_allclose(ws.gram(), rows @ rows.T, rtol=1e-12)
    assert ws.b.size == 16  # 2 -> 4 -> 8 -> 16
    ws.mark_active(np.arange(9) % 3 == 0, 20)
    ws.keep(20 - ws.active() < 5)  # constraints idle for 5 iterations leave
    A, b = ws.rows()
    np.testing.assert_array_equal(A, rows[::3])
    np.testing.assert_array_equal(b, [0.0, 3.0, 6.0])
    np.testing.assert_allclose(ws.gram(), rows[::3] @ rows[::3].T, rtol=1e-12)


def test_a_warm_start_from_the_constraints_of_a_solve_ends_at_its_optimum():
    """A solve started from an earlier solve's constraints (cp_module.solve's constraints)
    starts at their solution: it confirms at once on the same problem, and on a problem
    with a subset of its samples' constraints it reaches the cold solve's objective."""
    X, y = make_data(seed=3)
    options = {
        "C": 50.0,
        "loss": "ap",
        "method": "qs",
        "tol": 1e-4,
        "max_iter": 500,
        "callback": None,
    }
    kept = cp_module.Constraints(X.shape[1])
    cold = cp_module.solve(Problem(X, y, **options), X.shape[1], constraints=kept)
    assert kept.k > 1
    again = cp_module.solve(Problem(X, y, **options), X.shape[1], constraints=kept)
    assert again.n_iter == 1 and again.converged
    np.testing.assert_allclose(again.objective[-1], cold.objective[-1], rtol=1e-6)
    fresh = cp_module.solve(Problem(X, y, **options), X.shape[1])
    np.testing.assert_array_equal(fresh.w, cold.w)  # no constraints given: the cold path
    assert fresh.n_iter > 3


def test_capacity_changes_nothing(monkeypatch):
    X, y = make_data(seed=5)
    ref = cutting_plane(X, y, C=50.0, tol=0.0, max_iter=12)
    monkeypatch.setattr(cp_module, "INITIAL_CAPACITY", 1)
    res = cutting_plane(X, y, C=50.0, tol=0.0, max_iter=12)
    np.testing.assert_array_equal(res.w, ref.w)
    np.testing.assert_array_equal(res.objective, ref.objective)


@pytest.mark.parametrize("loss", ["ap", "01"])
def test_lai_calls_reuse_one_workspace(monkeypatch, loss):
    X, y = make_data(seed=6)
    spaces, coefs = [], []

    def spy(*args, workspace=None, **kwargs):
        spaces.append(workspace)
        res = lai(*args, workspace=workspace, **kwargs)
        coefs.append(res.coef)
        return res

    monkeypatch.setattr(problem_module, "lai", spy)
    res = cutting_plane(X, y, C=50.0, loss=loss, tol=0.0, max_iter=6)
    assert len(spaces) == res.lai_calls + 1  # and the untimed first call
    assert isinstance(spaces[0], Workspace) and all(ws is spaces[0] for ws in spaces)
    assert all(np.shares_memory(c, coefs[0]) for c in coefs)


def test_primal_and_dual_forms_of_the_working_set_qp_agree():
    """Past features + 1 constraints the working set's QP is solved in the primal; its
    multipliers are the dual's alpha (same w, same objective)."""
    rng = np.random.default_rng(3)
    A = rng.normal(size=(40, 6)) * 0.1
    b = rng.uniform(0.2, 1.0, 40)
    solve_qp = cp_module._qp_backend("daqp")
    for C in (0.5, 10.0, 1000.0):
        by_primal = solve_qp(A @ A.T, A, b, C)
        wide = np.hstack([A, np.zeros((40, 40))])  # the same QP with 46 features: the dual
        by_dual = solve_qp(A @ A.T, wide, b, C)
        np.testing.assert_allclose(A.T @ by_primal, A.T @ by_dual, atol=1e-6)
        assert by_primal.sum() == pytest.approx(by_dual.sum(), abs=1e-6 * C)


@pytest.mark.parametrize("solver", SOLVERS.values())
def test_lai_callback_sees_the_inputs_of_every_timed_lai_call(solver):
    X, y = make_data()
    seen = []
    res = run(
        solver,
        X,
        y,
        C=10.0,
        loss="ap",
        lai_callback=lambda s, labels: seen.append((s.copy(), labels.copy())),
    )
    assert len(seen) == res.lai_calls
    assert not seen[0][0].any()  # w starts at zero
    assert all((labels == y).all() for _, labels in seen)
    # the solver's own record of each iteration: its last LAI call's scores
    progress = []
    run(solver, X, y, C=10.0, loss="ap", callback=lambda p: progress.append(p.scores))
    per_iteration = len(seen) // len(progress)
    for k, scores in enumerate(progress):
        np.testing.assert_array_equal(seen[(k + 1) * per_iteration - 1][0], scores)
    with pytest.raises(ValueError, match="lai_callback must be callable"):
        solver(X, y, lai_callback=3)
