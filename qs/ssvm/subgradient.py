"""Subgradient descent (Pegasos, Shalev-Shwartz et al. 2011) with weighted iterate averaging.

On ``lambda/2 |w|^2 + xi(w)`` with ``lambda = 1/C`` (the primal divided by ``C``), the step
``1/(lambda t)`` along the subgradient ``lambda w - a`` gives
``w_{t+1} = (1 - 1/t) w_t + (C/t) a_t``. With one "example" (the whole ranking) the method
is full-batch and deterministic; with ``batch_size`` each step takes the most violated
ranking of a random subset of the samples (both classes kept in proportion), drawn from
``random_state``, so that runs repeat for a seed. Returned is the average of the iterates
weighted by ``t`` (Lacoste-Julien, Schmidt, Bach 2012), which converges as O(1/t) where the
plain average is O(log t / t). The iterates are Frank-Wolfe iterates with step ``1/t`` (each
is ``A^T alpha`` for a feasible dual ``alpha``), so the average carries a dual point too:
each iteration evaluates the average with a second LAI call for its primal objective and
duality gap. With subsets that dual reading is lost, so the gap is recorded as NaN and only
the iteration cap stops the method.
"""

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from qs.losses import QSLoss
from qs.ssvm._problem import Problem, Progress, SolverResult


def subgradient(
    X: Any,
    labels: npt.ArrayLike,
    *,
    C: float = 1.0,
    loss: str | QSLoss = "ap",
    method: str = "auto",
    tol: float = 1e-3,
    max_iter: int = 1000,
    batch_size: int | None = None,
    random_state: int | np.random.Generator | None = None,
    callback: Callable[[Progress], object] | None = None,
    lai_callback: Callable[[np.ndarray, np.ndarray], object] | None = None,
) -> SolverResult:
    """Train the structured SVM by averaged subgradient descent.

    Each iteration makes two LAI calls: the step, and the averaged iterate's objective.

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
        Full batch, stop when the averaged iterate's duality gap is at most ``C * tol``
        (with ``batch_size`` only ``max_iter`` stops the method).
    max_iter : int, default 1000
        Cap on iterations.
    batch_size : int or None, default None
        None: every sample at every step; else the subset size of a stochastic step, at
        least 2.
    random_state : int, numpy.random.Generator or None, default None
        Seed or generator of the subsets.
    callback : callable or None, default None
        Called with a [qs.ssvm.Progress][] after each iteration.

    Returns
    -------
    SolverResult
        The averaged weights and the run's record ([qs.ssvm.SolverResult][]).

    Raises
    ------
    ValueError
        On bad data or parameters (as [qs.ssvm.cutting_plane.cutting_plane][]), or a ``batch_size``
        outside [2, n_samples].

    Examples
    --------
    >>> import numpy as np
    >>> from qs.ssvm import subgradient
    >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1]])
    >>> res = subgradient(X, [1, 1, 0, 0, 0], C=10.0, max_iter=50)
    >>> res.n_iter, res.lai_calls
    (50, 100)
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
    return solve(prob, prob.X.shape[1], _subsets(prob.is_pos, batch_size, random_state))


def solve(prob: Any, n_features: int, draw: Callable[[], np.ndarray] | None = None) -> SolverResult:
    """The averaged subgradient loop on any oracle ``prob``.

    Parameters
    ----------
    prob : Problem
        An object with a ``qs.ssvm._problem.Problem``'s ``most_violated``, ``primal``,
        ``log``, ``result``, ``C``, ``tol`` and ``max_iter``.
    n_features : int
        Length of the weights.
    draw : callable or None, default None
        None (full batch) or a function drawing the rows of a stochastic step.

    Returns
    -------
    SolverResult
        What ``prob.result`` makes of the averaged weights.

    Examples
    --------
    >>> from qs.ssvm.queries import QueryProblem
    >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1]])
    >>> prob = QueryProblem(X, [1, 1, 0, 0, 0], [0, 5], C=10.0, loss="ap", method="auto",
    ...                     tol=1e-3, max_iter=200, callback=None)  # one query
    >>> res = solve(prob, 2)
    >>> res.w.shape, len(res.objective) == prob.max_iter
    ((2,), True)
    """
    w = np.zeros(n_features)
    ell = 0.0
    w_avg, ell_avg = w, ell
    for t in range(1, prob.max_iter + 1):
        a, delta, _ = prob.most_violated(w, rows=None if draw is None else draw())
        w = (1.0 - 1.0 / t) * w + (prob.C / t) * a
        ell = (1.0 - 1.0 / t) * ell + (prob.C / t) * delta
        rho = 2.0 / (t + 1)
        w_avg = (1.0 - rho) * w_avg + rho * w
        ell_avg = (1.0 - rho) * ell_avg + rho * ell
        _, _, xi = prob.most_violated(w_avg)
        gap = w_avg @ w_avg + prob.C * xi - ell_avg if draw is None else np.nan
        prob.log(prob.primal(w_avg, xi), gap)
        converged = gap <= prob.C * prob.tol
        if converged:
            break
    return prob.result(w_avg, converged)


def _subsets(
    is_pos: np.ndarray, batch_size: int | None, random_state: Any
) -> Callable[[], np.ndarray] | None:
    """None for full batch; else a function drawing the rows of one stochastic step: a
    random subset of ``batch_size`` samples with positives in proportion (at least one of
    each class)."""
    if batch_size is None:
        return None
    n = is_pos.size
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, numbers.Integral)
        or not 2 <= batch_size <= n
    ):
        raise ValueError(f"batch_size must be None or an integer in [2, {n}]; got {batch_size!r}.")
    rng = np.random.default_rng(random_state)
    pos, neg = np.flatnonzero(is_pos), np.flatnonzero(~is_pos)
    n_pos = min(pos.size, max(1, round(batch_size * pos.size / n)))
    n_pos = min(n_pos, batch_size - 1)
    n_neg = min(neg.size, batch_size - n_pos)

    def draw():
        rows = np.r_[rng.choice(pos, n_pos, replace=False), rng.choice(neg, n_neg, replace=False)]
        return np.sort(rows)

    return draw
