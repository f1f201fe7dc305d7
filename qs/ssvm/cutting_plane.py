"""1-slack cutting plane (Joachims, Finley, Yu 2009): working set of most violated constraints.

Each iteration adds the most violated constraint ``w . a >= b - xi`` to the working set and
solves the working set's dual,
``max_alpha  b . alpha - 1/2 |A^T alpha|^2  s.t.  alpha >= 0, sum(alpha) <= C``,
a QP of one variable per constraint, with a maintained solver through ``qpsolvers``;
``w = A^T alpha``. It stops when the most violated constraint exceeds the working set's
slack by at most ``tol``, which bounds the duality gap by ``C * tol`` (plus the QP's error).

The working set grows in place: its constraint rows and Gram matrix live in arrays whose
capacity doubles when full, and each iteration writes one row, and one row and column of the
Gram matrix, instead of stacking a new matrix and rebuilding the Gram matrix.
"""

import numpy as np
import scipy.sparse as sp

from qs.ssvm._problem import Problem

#: ridge added to the working set's Gram matrix, relative to its largest diagonal entry:
#: the Gram matrix is only semi-definite, and daqp (like quadprog) needs it definite
RIDGE = 1e-12
#: constraints the working set holds before its first doubling
INITIAL_CAPACITY = 16


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
    solve_qp = _qp_backend(qp_solver)
    ws = _WorkingSet(prob.X.shape[1], min(INITIAL_CAPACITY, prob.max_iter))
    alpha = np.empty(0)
    w = np.zeros(prob.X.shape[1])
    for it in range(prob.max_iter):
        a, b_new, xi = prob.most_violated(w)
        A, b = ws.rows()
        xi_ws = float(np.max(b - A @ w, initial=0.0))
        prob.log(prob.primal(w, xi), w @ w + prob.C * xi - b @ alpha)
        converged = xi <= xi_ws + prob.tol
        if converged or it == prob.max_iter - 1:
            break
        ws.add(a, b_new)
        A, b = ws.rows()
        alpha = solve_qp(ws.gram(), b, prob.C)
        w = A.T @ alpha
    return prob.result(w, converged)


class _WorkingSet:
    """Constraints ``w . a_i >= b_i - xi`` and their Gram matrix ``a_i . a_j``, grown in place
    in arrays whose capacity doubles when full."""

    def __init__(self, n_features, capacity):
        self.k = 0
        self.A = np.empty((capacity, n_features))
        self.b = np.empty(capacity)
        self.G = np.empty((capacity, capacity))

    def add(self, a, b_new):
        k = self.k
        if k == self.b.size:
            self._grow(2 * k)
        cross = self.A[:k] @ a
        self.G[:k, k] = cross
        self.G[k, :k] = cross
        self.G[k, k] = a @ a
        self.A[k] = a
        self.b[k] = b_new
        self.k = k + 1

    def _grow(self, capacity):
        k = self.k
        A, b, G = self.A, self.b, self.G
        self.A = np.empty((capacity, A.shape[1]))
        self.b = np.empty(capacity)
        self.G = np.empty((capacity, capacity))
        self.A[:k], self.b[:k], self.G[:k, :k] = A[:k], b[:k], G[:k, :k]

    def rows(self):
        """(A, b) of the constraints held: views, valid until the next :meth:`add`."""
        return self.A[:self.k], self.b[:self.k]

    def gram(self):
        return self.G[:self.k, :self.k]


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
        scale = gram.diagonal().max() or 1.0
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
