"""Frank-Wolfe on the structured SVM's dual with exact line search (Lacoste-Julien et al. 2013).

The dual ``max_alpha  sum_R alpha_R Delta_R - 1/2 |sum_R alpha_R a_R|^2`` over
``alpha >= 0, sum(alpha) <= C`` is kept through ``w = sum alpha_R a_R`` and
``ell = sum alpha_R Delta_R``. The linear oracle over that scaled simplex is the LAI call: its
vertex puts all of ``C`` on the most violated constraint, ``(w_s, ell_s) = C (a, Delta)``.
Block-coordinate FW with a single block (one "example": the whole ranking) is this method.
No QP; the duality gap ``|w|^2 + C xi(w) - ell`` comes for free with each oracle call.
"""

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from qs.losses import QSLoss
from qs.ssvm._problem import Problem, Progress, SolverResult


def frank_wolfe(
    X: Any,
    labels: npt.ArrayLike,
    *,
    C: float = 1.0,
    loss: str | QSLoss = "ap",
    method: str = "auto",
    tol: float = 1e-3,
    max_iter: int = 1000,
    callback: Callable[[Progress], object] | None = None,
    lai_callback: Callable[[np.ndarray, np.ndarray], object] | None = None,
) -> SolverResult:
    """Train the structured SVM by Frank-Wolfe on its dual.

    Parameters
    ----------
    X : array_like or scipy.sparse matrix of shape (n_samples, n_features)
        The features.
    labels : array_like of shape (n_samples,)
        1/True positive, 0/-1/False negative.
    C : float, default 1.0
        Weight of the slack (> 0); ``xi`` is the loss-scale hinge, so for loss "01" it is
        the mean hinge loss and ``C = C_liblinear * n_samples``.
    loss : str or QSLoss, default "ap"
        "ap", "ndcg", "01" or a [qs.losses.QSLoss][].
    method : str, default "auto"
        LAI method passed to [qs.inference.lai][].
    tol : float, default 1e-3
        Stop when the duality gap is at most ``C * tol``.
    max_iter : int, default 1000
        Cap on iterations (LAI calls).
    callback : callable or None, default None
        Called with a [qs.ssvm.Progress][] after each iteration.

    Returns
    -------
    SolverResult
        The weights and the run's record ([qs.ssvm.SolverResult][]).

    Raises
    ------
    ValueError
        On bad data or parameters (as [qs.ssvm.cutting_plane.cutting_plane][]).

    Examples
    --------
    >>> import numpy as np
    >>> from qs.ssvm import frank_wolfe
    >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1]])
    >>> res = frank_wolfe(X, [1, 1, 0, 0, 0], C=10.0)
    >>> bool(res.converged), bool(res.gap[-1] <= 10.0 * 1e-3)
    (True, True)
    """
    prob = Problem(
        X,
        labels,
        C=C,
        loss=loss,
        method=method,
        tol=tol,
        max_iter=max_iter,
        callback=callback,
        lai_callback=lai_callback,
    )
    return solve(prob, prob.X.shape[1])


def solve(prob: Any, n_features: int) -> SolverResult:
    """The Frank-Wolfe loop on any oracle ``prob``.

    Parameters
    ----------
    prob : Problem
        An object with a ``qs.ssvm._problem.Problem``'s ``most_violated``, ``primal``,
        ``log``, ``result``, ``C``, ``tol`` and ``max_iter``.
    n_features : int
        Length of the weights.

    Returns
    -------
    SolverResult
        What ``prob.result`` makes of the final weights.

    Examples
    --------
    >>> from qs.ssvm.queries import QueryProblem
    >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1]])
    >>> prob = QueryProblem(X, [1, 1, 0, 0, 0], [0, 5], C=10.0, loss="ap", method="auto",
    ...                     tol=1e-3, max_iter=200, callback=None)  # one query
    >>> res = solve(prob, 2)
    >>> bool(res.converged), np.round(res.w, 2).tolist()
    (True, [0.37, -0.11])
    """
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
