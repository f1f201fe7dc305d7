"""1-slack cutting plane (Joachims, Finley, Yu 2009): working set of most violated constraints.

Each iteration adds the most violated constraint ``w . a >= b - xi`` to the working set and
solves the working set's dual,
``max_alpha  b . alpha - 1/2 |A^T alpha|^2  s.t.  alpha >= 0, sum(alpha) <= C``,
a QP of one variable per constraint, with a maintained solver through ``qpsolvers``;
``w = A^T alpha``. It stops when the most violated constraint exceeds the working set's
slack by at most ``tol``, which bounds the duality gap by ``C * tol`` (plus the QP's error).
"""

import numpy as np
import scipy.sparse as sp

from qs.ssvm._problem import Problem

#: ridge added to the working set's Gram matrix, relative to the scale of the dual (see
#: ``_qp_backend``): the Gram matrix is only semi-definite, and daqp (like quadprog) needs
#: it definite
RIDGE = 1e-12


def cutting_plane(X, labels, *, C=1.0, loss="ap", method="auto", tol=1e-3, max_iter=1000,
                  qp_solver="daqp", callback=None):
    """Train the structured SVM by the 1-slack cutting-plane method.

    Parameters
    ----------
    X : array or scipy.sparse matrix of shape (n_samples, n_features).
    labels : array of shape (n_samples,): 1/True positive, 0/-1/False negative.
    C : weight of the slack (> 0); ``xi`` is the loss-scale hinge, so for loss "01" it is
        the mean hinge loss and ``C = C_liblinear * n_samples``.
    loss : "ap", "ndcg", "01" or a :class:`qs.losses.QSLoss`.
    method : LAI method passed to :func:`qs.inference.lai`.
    tol : stop when ``xi(w) <= xi_working_set + tol`` (units of the loss).
    max_iter : cap on iterations (LAI calls).
    qp_solver : a ``qpsolvers`` backend name for the working set's dual QP.
    callback : called with a :class:`~qs.ssvm.Progress` after each iteration.

    Returns a :class:`~qs.ssvm.SolverResult`.
    """
    prob = Problem(X, labels, C=C, loss=loss, method=method, tol=tol, max_iter=max_iter,
                   callback=callback)
    return solve(prob, prob.X.shape[1], qp_solver)


def solve(prob, n_features, qp_solver="daqp", drop=None):
    """The cutting-plane loop from ``w = 0`` on any oracle ``prob``: a
    :class:`~qs.ssvm._problem.Problem`, or an object with its ``most_violated``, ``primal``,
    ``log``, ``result``, ``C``, ``tol`` and ``max_iter`` (the latent solver's).

    ``drop=(idle, every)``: every ``every`` iterations, constraints whose dual variable has
    been zero for the last ``idle`` iterations leave the working set (the released latent
    AP-SVM's rule, 20 and 50), which keeps the QP small on long runs.
    """
    solve_qp = _qp_backend(qp_solver)
    w = np.zeros(n_features)
    A = np.empty((0, n_features))
    b = np.empty(0)
    gram = np.empty((0, 0))
    alpha = np.empty(0)
    last_active = np.empty(0, dtype=np.int64)
    for it in range(prob.max_iter):
        a, b_new, xi = prob.most_violated(w)
        xi_ws = float(np.max(b - A @ w, initial=0.0))
        prob.log(prob.primal(w, xi), w @ w + prob.C * xi - b @ alpha)
        converged = xi <= xi_ws + prob.tol
        if converged or it == prob.max_iter - 1:
            break
        if drop is not None and it > 0 and it % drop[1] == 0:
            keep = it - last_active < drop[0]
            A, b, gram, last_active = A[keep], b[keep], gram[np.ix_(keep, keep)], last_active[keep]
        cross = A @ a
        gram = np.block([[gram, cross[:, None]], [cross[None, :], np.array([[a @ a]])]])
        A, b = np.vstack([A, a]), np.append(b, b_new)
        last_active = np.append(last_active, it)
        alpha = solve_qp(gram, b, prob.C)
        last_active[alpha > 0] = it
        w = A.T @ alpha
    return prob.result(w, converged)


def _qp_backend(name):
    """``solve(gram, b, C)`` -> alpha for the working set's dual, by the ``qpsolvers`` backend."""
    try:
        import qpsolvers
    except ImportError as exc:
        raise ImportError(
            "the cutting-plane solver needs qpsolvers and a QP backend: "
            "pip install qpsolvers daqp"
        ) from exc
    if name not in qpsolvers.available_solvers:
        raise ValueError(
            f"qp_solver {name!r} is not available; installed qpsolvers backends: "
            f"{sorted(qpsolvers.available_solvers)}. Install it (pip install {name}) or pick one."
        )

    # sparse-only backends get CSC matrices (qpsolvers would convert them, with a warning)
    matrix = np.asarray if name in qpsolvers.dense_solvers else sp.csc_matrix

    def solve(gram, b, C):
        k = b.size
        # The dual's two terms are of order gram * C^2 and b * C: the ridge is relative to
        # the larger of gram and b / C. Relative to gram alone it vanished when every
        # constraint's a is rounding noise (all samples with the same features: a = 0 up to
        # 1e-16, gram 1e-32), and daqp failed on that nearly linear problem.
        scale = max(gram.diagonal().max(), b.max() / C) or 1.0
        # The QP is always feasible and bounded; a backend that needs a definite matrix can
        # still fail when the constraints outnumber the features: retry with a larger ridge.
        for ridge in (RIDGE, 1e-10, 1e-8, 1e-6):
            alpha = qpsolvers.solve_qp(matrix(gram + ridge * scale * np.eye(k)), -b,
                                       matrix(np.ones((1, k))), np.array([C]),
                                       lb=np.zeros(k), solver=name)
            if alpha is not None:
                return np.clip(alpha, 0.0, None)
        raise RuntimeError(f"QP backend {name!r} failed on a working set of {k} constraints.")

    return solve
