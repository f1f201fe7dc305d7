"""Subgradient descent (Pegasos, Shalev-Shwartz et al. 2011) with weighted iterate averaging.

On ``lambda/2 |w|^2 + xi(w)`` with ``lambda = 1/C`` (the primal divided by ``C``), the step
``1/(lambda t)`` along the subgradient ``lambda w - a`` gives
``w_{t+1} = (1 - 1/t) w_t + (C/t) a_t``: with one "example" (the whole ranking) the method is
full-batch and deterministic. Returned is the average of the iterates weighted by ``t``
(Lacoste-Julien, Schmidt, Bach 2012), which converges as O(1/t) where the plain average is
O(log t / t). The iterates are Frank-Wolfe iterates with step ``1/t`` (each is ``A^T alpha``
for a feasible dual ``alpha``), so the average carries a dual point too: each iteration
evaluates the average with a second LAI call for its primal objective and duality gap.
"""

import numpy as np

from qs.ssvm._problem import Problem


def subgradient(X, labels, *, C=1.0, loss="ap", method="auto", tol=1e-3, max_iter=1000,
                callback=None):
    """Train the structured SVM by averaged subgradient descent.

    Parameters are those of :func:`~qs.ssvm.cutting_plane` (less ``qp_solver``); it stops when
    the averaged iterate's duality gap is at most ``C * tol``. Two LAI calls per iteration
    (the step, and the averaged iterate's objective). Returns a :class:`~qs.ssvm.SolverResult`.
    """
    prob = Problem(X, labels, C=C, loss=loss, method=method, tol=tol, max_iter=max_iter,
                   callback=callback)
    w = np.zeros(prob.X.shape[1])
    ell = 0.0
    w_avg, ell_avg = w, ell
    for t in range(1, prob.max_iter + 1):
        a, delta, _ = prob.most_violated(w)
        w = (1.0 - 1.0 / t) * w + (prob.C / t) * a
        ell = (1.0 - 1.0 / t) * ell + (prob.C / t) * delta
        rho = 2.0 / (t + 1)
        w_avg = (1.0 - rho) * w_avg + rho * w
        ell_avg = (1.0 - rho) * ell_avg + rho * ell
        _, _, xi = prob.most_violated(w_avg)
        gap = w_avg @ w_avg + prob.C * xi - ell_avg
        prob.log(prob.primal(w_avg, xi), gap)
        converged = gap <= prob.C * prob.tol
        if converged:
            break
    return prob.result(w_avg, converged)
