"""Frank-Wolfe on the structured SVM's dual with exact line search (Lacoste-Julien et al. 2013).

The dual ``max_alpha  sum_R alpha_R Delta_R - 1/2 |sum_R alpha_R a_R|^2`` over
``alpha >= 0, sum(alpha) <= C`` is kept through ``w = sum alpha_R a_R`` and
``ell = sum alpha_R Delta_R``. The linear oracle over that scaled simplex is the LAI call: its
vertex puts all of ``C`` on the most violated constraint, ``(w_s, ell_s) = C (a, Delta)``.
Block-coordinate FW with a single block (one "example": the whole ranking) is this method.
No QP; the duality gap ``|w|^2 + C xi(w) - ell`` comes for free with each oracle call.
"""

import numpy as np

from qs.ssvm._problem import Problem


def frank_wolfe(X, labels, *, C=1.0, loss="ap", method="auto", tol=1e-3, max_iter=1000,
                callback=None, lai_callback=None):
    """Train the structured SVM by Frank-Wolfe on its dual.

    Parameters are those of :func:`~qs.ssvm.cutting_plane` (less ``qp_solver``); it stops when
    the duality gap is at most ``C * tol``. Returns a :class:`~qs.ssvm.SolverResult`.
    """
    prob = Problem(X, labels, C=C, loss=loss, method=method, tol=tol, max_iter=max_iter,
                   callback=callback, lai_callback=lai_callback)
    return solve(prob, prob.X.shape[1])


def solve(prob, n_features):
    """The Frank-Wolfe loop on any oracle ``prob`` with a
    :class:`~qs.ssvm._problem.Problem`'s ``most_violated``, ``primal``, ``log``, ``result``,
    ``C``, ``tol`` and ``max_iter``."""
    w = np.zeros(n_features)
    ell = 0.0
    for it in range(prob.max_iter):
        a, delta, xi = prob.most_violated(w)
        gap = w @ w + prob.C * xi - ell
        prob.log(prob.primal(w, xi), gap)
        converged = gap <= prob.C * prob.tol
        if converged or it == prob.max_iter - 1:
            break
        step = w - prob.C * a
        norm2 = step @ step
        gamma = 1.0 if norm2 == 0.0 else min(1.0, max(0.0, gap / norm2))
        w = w - gamma * step
        ell += gamma * (prob.C * delta - ell)
    return prob.result(w, converged)
