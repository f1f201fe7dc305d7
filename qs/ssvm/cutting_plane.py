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

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from qs.losses import QSLoss
from qs.ssvm._problem import Problem, Progress, SolverResult

#: ridge added to the working set's Gram matrix, relative to the scale of the dual (see
#: ``_qp_backend``): the Gram matrix is only semi-definite, and daqp (like quadprog) needs
#: it definite
RIDGE = 1e-12
#: constraints the working set holds before its first doubling
INITIAL_CAPACITY = 16


def cutting_plane(
    X: Any,
    labels: npt.ArrayLike,
    *,
    C: float = 1.0,
    loss: str | QSLoss = "ap",
    method: str = "auto",
    tol: float = 1e-3,
    max_iter: int = 1000,
    qp_solver: str = "daqp",
    callback: Callable[[Progress], object] | None = None,
    lai_callback: Callable[[np.ndarray, np.ndarray], object] | None = None,
) -> SolverResult:
    """Train the structured SVM by the 1-slack cutting-plane method.

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
        Stop when ``xi(w) <= xi_working_set + tol`` (units of the loss).
    max_iter : int, default 1000
        Cap on iterations (LAI calls).
    qp_solver : str, default "daqp"
        A ``qpsolvers`` backend name for the working set's dual QP.
    callback : callable or None, default None
        Called with a [qs.ssvm.Progress][] after each iteration.
    lai_callback : callable or None, default None
        Called as ``lai_callback(scores, labels)`` with the inputs of every timed LAI call,
        before it (a recorder, to replay a training's calls). The arrays may be reused by
        later calls: keep copies.

    Returns
    -------
    SolverResult
        The weights and the run's record ([qs.ssvm.SolverResult][]).

    Raises
    ------
    ValueError
        On bad data or parameters (no positive or no negative, ``C <= 0``, ``tol < 0``,
        ``max_iter < 1``, an unknown loss or QP backend).
    ImportError
        If ``qpsolvers`` is not installed.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.ssvm import cutting_plane
    >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1]])
    >>> res = cutting_plane(X, [1, 1, 0, 0, 0], C=10.0)
    >>> bool(res.converged), bool(res.gap[-1] <= 10.0 * 1e-3)
    (True, True)
    >>> np.round(res.w, 2).tolist()
    [0.37, -0.12]
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
    return solve(prob, prob.X.shape[1], qp_solver)


def solve(
    prob: Any,
    n_features: int,
    qp_solver: str = "daqp",
    drop: tuple[int, int] | None = None,
    constraints: "Constraints | None" = None,
) -> SolverResult:
    """The cutting-plane loop on any oracle ``prob``.

    Parameters
    ----------
    prob : Problem
        A ``qs.ssvm._problem.Problem``, or an object with its ``most_violated``,
        ``primal``, ``log``, ``result``, ``C``, ``tol`` and ``max_iter`` (the latent
        solver's).
    n_features : int
        Length of the weights.
    qp_solver : str, default "daqp"
        A ``qpsolvers`` backend name.
    drop : tuple of int or None, default None
        ``(idle, every)``: every ``every`` iterations, constraints whose dual variable has
        been zero for the last ``idle`` iterations leave the working set (the released
        latent AP-SVM's rule, 20 and 50), which keeps the QP small on long runs.
    constraints : Constraints or None, default None
        The working set to start from and grow in (left holding the solve's constraints).
        Empty, the loop starts at ``w = 0``; holding the constraints of an earlier solve
        whose every constraint is one of this problem's too (the same problem, or one with
        more labellings to choose from, as a latent problem whose negatives gain boxes), it
        starts at their solution: a warm start, the same optimum to the tolerance in fewer
        iterations.

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
    (True, [0.37, -0.12])
    """
    solve_qp = _qp_backend(qp_solver)
    ws = (
        Constraints(n_features, min(INITIAL_CAPACITY, prob.max_iter))
        if constraints is None
        else constraints
    )
    alpha = np.empty(0)
    w = np.zeros(n_features)
    if ws.k:
        ws.mark_active(np.ones(ws.k, bool), 0)
        A, b = ws.rows()
        alpha = solve_qp(ws.gram(), A, b, prob.C)
        w = A.T @ alpha
    for it in range(prob.max_iter):
        a, b_new, xi = prob.most_violated(w)
        A, b = ws.rows()
        xi_ws = float(np.max(b - A @ w, initial=0.0))
        prob.log(prob.primal(w, xi), w @ w + prob.C * xi - b @ alpha)
        converged = xi <= xi_ws + prob.tol
        if converged or it == prob.max_iter - 1:
            break
        if drop is not None and it > 0 and it % drop[1] == 0:
            ws.keep(it - ws.active() < drop[0])
        ws.add(a, b_new, it)
        A, b = ws.rows()
        alpha = solve_qp(ws.gram(), A, b, prob.C)
        ws.mark_active(alpha > 0, it)
        w = A.T @ alpha
    return prob.result(w, converged)


class Constraints:
    """The cutting plane's working set: constraints ``w . a_i >= b_i - xi`` and their Gram
    matrix ``a_i . a_j``, grown in place in arrays whose capacity doubles when full.

    Parameters
    ----------
    n_features : int
        Length of each constraint's ``a``.
    capacity : int, default 16
        Constraints held before the first doubling.

    Examples
    --------
    >>> ws = Constraints(2, capacity=1)
    >>> ws.add(np.array([1.0, 0.0]), 0.5, it=0)
    >>> ws.add(np.array([1.0, 2.0]), 0.25, it=1)
    >>> ws.k, ws.gram().tolist()
    (2, [[1.0, 1.0], [1.0, 5.0]])
    """

    def __init__(self, n_features: int, capacity: int = INITIAL_CAPACITY) -> None:
        self.k = 0
        self.A = np.empty((capacity, n_features))
        self.b = np.empty(capacity)
        self.G = np.empty((capacity, capacity))
        self.last_active = np.empty(capacity, dtype=np.int64)

    def add(self, a: np.ndarray, b_new: float, it: int) -> None:
        """Add the constraint ``w . a >= b_new - xi``, growing the arrays when full.

        Parameters
        ----------
        a : ndarray of shape (n_features,)
            The constraint's direction.
        b_new : float
            Its offset (the loss).
        it : int
            The iteration that made it.

        Examples
        --------
        >>> ws = Constraints(2, capacity=1)
        >>> ws.add(np.array([1.0, 0.0]), 0.5, it=0)
        >>> ws.add(np.array([1.0, 2.0]), 0.25, it=1)
        >>> ws.rows()[1].tolist()
        [0.5, 0.25]
        """
        k = self.k
        if k == self.b.size:
            self._grow(2 * k)
        cross = self.A[:k] @ a
        self.G[:k, k] = cross
        self.G[k, :k] = cross
        self.G[k, k] = a @ a
        self.A[k] = a
        self.b[k] = b_new
        self.last_active[k] = it
        self.k = k + 1

    def _grow(self, capacity: int) -> None:
        k = self.k
        A, b, G, last = self.A, self.b, self.G, self.last_active
        self.A = np.empty((capacity, A.shape[1]))
        self.b = np.empty(capacity)
        self.G = np.empty((capacity, capacity))
        self.last_active = np.empty(capacity, dtype=np.int64)
        self.A[:k], self.b[:k], self.G[:k, :k] = A[:k], b[:k], G[:k, :k]
        self.last_active[:k] = last[:k]

    def mark_active(self, active: np.ndarray, it: int) -> None:
        """Record an iteration as the last in which some constraints had a non-zero dual.

        Parameters
        ----------
        active : ndarray of bool
            A mask over the constraints held.
        it : int
            The iteration.

        Examples
        --------
        >>> ws = Constraints(2, capacity=1)
        >>> ws.add(np.array([1.0, 0.0]), 0.5, it=0)
        >>> ws.add(np.array([1.0, 2.0]), 0.25, it=1)
        >>> ws.mark_active(np.array([True, False]), 7)
        >>> ws.active().tolist()
        [7, 1]
        """
        self.last_active[: self.k][active] = it

    def active(self) -> np.ndarray:
        """The last iteration each constraint held was active (or added).

        Returns
        -------
        ndarray of int64
            One iteration per constraint held (a view).

        Examples
        --------
        >>> ws = Constraints(2, capacity=1)
        >>> ws.add(np.array([1.0, 0.0]), 0.5, it=0)
        >>> ws.add(np.array([1.0, 2.0]), 0.25, it=1)
        >>> ws.active().tolist()
        [0, 1]
        """
        return self.last_active[: self.k]

    def keep(self, mask: np.ndarray) -> None:
        """Keep only some constraints, compacted in place.

        Parameters
        ----------
        mask : ndarray of bool
            The constraints to keep, over those held.

        Examples
        --------
        >>> ws = Constraints(2, capacity=1)
        >>> ws.add(np.array([1.0, 0.0]), 0.5, it=0)
        >>> ws.add(np.array([1.0, 2.0]), 0.25, it=1)
        >>> ws.keep(np.array([False, True]))
        >>> ws.k, ws.gram().tolist(), ws.rows()[1].tolist()
        (1, [[5.0]], [0.25])
        """
        idx = np.flatnonzero(mask)
        n = idx.size
        self.A[:n], self.b[:n] = self.A[idx], self.b[idx]
        self.G[:n, :n] = self.G[np.ix_(idx, idx)]
        self.last_active[:n] = self.last_active[idx]
        self.k = n

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The constraints held, as views valid until the next `add`.

        Returns
        -------
        A : ndarray of shape (k, n_features)
            Their directions.
        b : ndarray of shape (k,)
            Their offsets.

        Examples
        --------
        >>> ws = Constraints(2, capacity=1)
        >>> ws.add(np.array([1.0, 0.0]), 0.5, it=0)
        >>> ws.add(np.array([1.0, 2.0]), 0.25, it=1)
        >>> A, b = ws.rows()
        >>> A.tolist(), b.tolist()
        ([[1.0, 0.0], [1.0, 2.0]], [0.5, 0.25])
        """
        return self.A[: self.k], self.b[: self.k]

    def gram(self) -> np.ndarray:
        """The Gram matrix ``a_i . a_j`` of the constraints held.

        Returns
        -------
        ndarray of shape (k, k)
            A view.

        Examples
        --------
        >>> ws = Constraints(2, capacity=1)
        >>> ws.add(np.array([1.0, 0.0]), 0.5, it=0)
        >>> ws.add(np.array([1.0, 2.0]), 0.25, it=1)
        >>> ws.gram().tolist()
        [[1.0, 1.0], [1.0, 5.0]]
        """
        return self.G[: self.k, : self.k]


def _qp_backend(name: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray, float], np.ndarray]:
    """``solve(gram, A, b, C)`` -> the working set's dual variables alpha, by the ``qpsolvers``
    backend, from whichever form of the QP is smaller: the dual (one variable per constraint)
    while the constraints number at most the features + 1, else the primal (``w`` and
    ``xi``: ``min 1/2 |w|^2 + C xi  s.t.  A w + xi >= b, xi >= 0``), whose constraints'
    multipliers are alpha (docs/training.md says why)."""
    try:
        import qpsolvers
    except ImportError as exc:
        raise ImportError(
            "the cutting-plane solver needs qpsolvers and a QP backend: pip install qpsolvers daqp"
        ) from exc
    if name not in qpsolvers.available_solvers:
        raise ValueError(
            f"qp_solver {name!r} is not available; installed qpsolvers backends: "
            f"{sorted(qpsolvers.available_solvers)}. Install it (pip install {name}) or pick one."
        )

    # sparse-only backends get CSC matrices (qpsolvers would convert them, with a warning)
    matrix = np.asarray if name in qpsolvers.dense_solvers else sp.csc_matrix

    def solve(gram, A, b, C):
        if b.size > A.shape[1] + 1:
            alpha = primal(A, b, C)
            if alpha is not None:
                return alpha
        return dual(gram, b, C)

    def primal(A, b, C):
        k, d = A.shape
        curvature = np.ones(d + 1)
        q = np.zeros(d + 1)
        q[d] = C
        lb = np.full(d + 1, -np.inf)
        lb[d] = 0.0
        G = -np.hstack([A, np.ones((k, 1))])
        # xi has no curvature: a ridge on it as on the dual's Gram matrix; None if it fails
        for ridge in (RIDGE, 1e-8):
            curvature[d] = ridge
            problem = qpsolvers.Problem(matrix(np.diag(curvature)), q, matrix(G), -b, lb=lb)
            solution = qpsolvers.solve_problem(problem, solver=name)
            if solution.found and solution.z is not None:
                return np.clip(solution.z, 0.0, None)
        return None

    def dual(gram, b, C):
        k = b.size
        # The dual's two terms are of order gram * C^2 and b * C: the ridge is relative to
        # the larger of gram and b / C. Relative to gram alone it vanished when every
        # constraint's a is rounding noise (all samples with the same features: a = 0 up to
        # 1e-16, gram 1e-32), and daqp failed on that nearly linear problem.
        scale = max(gram.diagonal().max(), b.max() / C) or 1.0
        # The QP is always feasible and bounded; a backend that needs a definite matrix can
        # still fail when the constraints outnumber the features: retry with a larger ridge.
        for ridge in (RIDGE, 1e-10, 1e-8, 1e-6):
            alpha = qpsolvers.solve_qp(
                matrix(gram + ridge * scale * np.eye(k)),
                -b,
                matrix(np.ones((1, k))),
                np.array([C]),
                lb=np.zeros(k),
                solver=name,
            )
            if alpha is not None:
                return np.clip(alpha, 0.0, None)
        raise RuntimeError(f"QP backend {name!r} failed on a working set of {k} constraints.")

    return solve
