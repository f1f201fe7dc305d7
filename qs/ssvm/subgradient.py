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

import numpy as np

from qs.ssvm._problem import Problem


def subgradient(X, labels, *, C=1.0, loss="ap", method="auto", tol=1e-3, max_iter=1000,
                batch_size=None, random_state=None, callback=None, lai_callback=None):
    """Train the structured SVM by averaged subgradient descent.

    Parameters are those of :func:`~qs.ssvm.cutting_plane` (less ``qp_solver``), plus
    ``batch_size`` (None: every sample at every step; else the subset size of a stochastic
    step, at least 2) and ``random_state`` (seed or ``np.random.Generator`` of the subsets).
    Full batch, it stops when the averaged iterate's duality gap is at most ``C * tol``. Two
    LAI calls per iteration (the step, and the averaged iterate's objective). Returns a
    :class:`~qs.ssvm.SolverResult`.
    """
    prob = Problem(X, labels, C=C, loss=loss, method=method, tol=tol, max_iter=max_iter,
                   callback=callback, lai_callback=lai_callback)
    return solve(prob, prob.X.shape[1], _subsets(prob.is_pos, batch_size, random_state))


def solve(prob, n_features, draw=None):
    """The averaged subgradient loop on any oracle ``prob`` with a
    :class:`~qs.ssvm._problem.Problem`'s ``most_violated``, ``primal``, ``log``, ``result``,
    ``C``, ``tol`` and ``max_iter``; ``draw``: None (full batch) or a function drawing the
    rows of a stochastic step."""
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


def _subsets(is_pos, batch_size, random_state):
    """None for full batch; else a function drawing the rows of one stochastic step: a
    random subset of ``batch_size`` samples with positives in proportion (at least one of
    each class)."""
    if batch_size is None:
        return None
    n = is_pos.size
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) \
            or not 2 <= batch_size <= n:
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
