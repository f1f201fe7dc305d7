"""The structured SVM seen by the solvers: validated data and the most-violated-constraint oracle.

Primal (1-slack): ``min_w 1/2 |w|^2 + C xi`` s.t. ``w . a_R >= Delta_R - xi`` for every
labelling ``R``, with ``a_R = X^T (coef* - coef_R)`` (``Psi(X, R*) - Psi(X, R)``). One
[qs.inference.lai][] call at ``scores = X w`` returns the most violated ``R``; its slack
``xi(w) = objective - ground_truth_F`` is the hinge term of the primal.
"""

import numbers
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sklearn.utils.validation import check_array

from qs.inference import Workspace, lai
from qs.losses import QSLoss
from qs.validation import as_positive_mask, check_counts


def ground_truth_coef(is_pos: npt.ArrayLike, loss: str | QSLoss) -> np.ndarray:
    """Coefficients of ``Psi(X, R*) = sum_k coef*_k x_k`` for the true labelling.

    Parameters
    ----------
    is_pos : array_like of bool, shape (n,)
        True for a positive sample.
    loss : str or QSLoss
        "01" for the binary hinge; any other value (a ranking loss) gives the ranking
        coefficients.

    Returns
    -------
    ndarray of shape (n,)
        Ranking losses (``Psi = 1/(PN) sum R_xy (x - y)`` with every positive above every
        negative): ``1/P`` on positives, ``-1/N`` on negatives. Loss "01"
        (``Psi = sum_k y_k x_k / (2n)``): ``y_k / (2n)`` with ``y`` in {-1, 1}.

    Examples
    --------
    >>> from qs.ssvm import ground_truth_coef
    >>> ground_truth_coef([True, True, False, False, False], "ap").round(4).tolist()
    [0.5, 0.5, -0.3333, -0.3333, -0.3333]
    >>> ground_truth_coef([True, False], "01").tolist()
    [0.25, -0.25]
    """
    is_pos = np.asarray(is_pos, dtype=bool)
    if loss == "01":
        return np.where(is_pos, 0.5, -0.5) / is_pos.size
    n_pos = np.count_nonzero(is_pos)
    return np.where(is_pos, 1.0 / n_pos, -1.0 / (is_pos.size - n_pos))


class Progress(NamedTuple):
    """What a solver's ``callback`` receives after each iteration.

    Attributes
    ----------
    iteration : int
        The iteration's number, from 1.
    objective : float
        The primal objective at the iteration's iterate.
    gap : float
        The duality gap there (NaN where the solver has no dual reading).
    scores : ndarray or None
        The scores the iteration's (last) LAI call ranked, as a benchmark may replay them.
    """

    iteration: int
    objective: float
    gap: float
    scores: np.ndarray | None = None


@dataclass(frozen=True)
class SolverResult:
    """Outcome of a solver.

    Attributes
    ----------
    w : ndarray of shape (n_features,)
        The weights returned.
    objective : ndarray of shape (n_iter,)
        Primal ``1/2 |w|^2 + C xi(w)`` at each iteration's iterate (last: at ``w``).
    gap : ndarray of shape (n_iter,)
        Duality gap ``primal - dual`` at each iteration (an upper bound on the primal's
        distance to the optimum).
    lai_times : ndarray
        Wall time of every LAI call (``time.perf_counter``, s), in call order.
    n_iter : int
        Iterations run.
    converged : bool
        Whether the tolerance was met before ``max_iter``.
    lai_compile_time : float
        What loading or compiling the kernels added to the first LAI call (s), kept out of
        ``lai_times``: the first call runs twice, and this is the first run's excess over
        the second, timed one.
    """

    w: np.ndarray
    objective: np.ndarray
    gap: np.ndarray
    lai_times: np.ndarray
    n_iter: int
    converged: bool
    lai_compile_time: float = 0.0

    @property
    def lai_calls(self) -> int:
        """Number of LAI calls."""
        return self.lai_times.size

    @property
    def lai_time(self) -> float:
        """Total LAI wall time (s)."""
        return float(self.lai_times.sum())

    @property
    def lai_time_per_call(self) -> float:
        """Mean LAI wall time per call (s)."""
        return self.lai_time / self.lai_calls


class Problem:
    """Validated data of one structured SVM, its oracle `most_violated`, and the record
    of a solver's run (LAI times, objective and gap per iteration)."""

    X: Any
    is_pos: np.ndarray
    C: float
    tol: float
    max_iter: int
    loss: str | QSLoss
    method: str
    coef_true: np.ndarray
    callback: Callable[[Progress], object] | None
    lai_callback: Callable[[np.ndarray, np.ndarray], object] | None
    lai_compile_time: float
    workspace: Workspace
    #: the dense dtypes ``X`` is kept in (others are converted to the first): float64 here
    dense_dtypes: tuple[type, ...] = (np.float64,)

    def __init__(
        self,
        X: Any,
        labels: npt.ArrayLike,
        *,
        C: float,
        loss: str | QSLoss,
        method: str,
        tol: float,
        max_iter: int,
        callback: Callable[[Progress], object] | None,
        lai_callback: Callable[[np.ndarray, np.ndarray], object] | None = None,
    ) -> None:
        self.X = _check_X(X, self.dense_dtypes)
        n = self.X.shape[0]
        self.is_pos = as_positive_mask(labels, n).astype(bool)
        check_counts(int(self.is_pos.sum()), int(n - self.is_pos.sum()))
        if not (isinstance(loss, QSLoss) or loss in ("ap", "ndcg", "01")):
            raise ValueError(f"loss must be 'ap', 'ndcg', '01' or a QSLoss; got {loss!r}.")
        self.C = check_positive("C", C)
        self.tol = check_positive("tol", tol, allow_zero=True)
        if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer; got {max_iter!r}.")
        self.max_iter = int(max_iter)
        self.loss, self.method = loss, method
        self.coef_true = ground_truth_coef(self.is_pos, loss)
        if callback is not None and not callable(callback):
            raise ValueError(f"callback must be callable or None; got {callback!r}.")
        self.callback = callback
        if lai_callback is not None and not callable(lai_callback):
            raise ValueError(f"lai_callback must be callable or None; got {lai_callback!r}.")
        self.lai_callback = lai_callback
        self.lai_times: list[float] = []
        self.objective: list[float] = []
        self.gap: list[float] = []
        self.lai_compile_time = 0.0
        self.last_scores: np.ndarray | None = None
        # the outputs and work arrays every LAI call reuses: a loop of calls allocates none
        self.workspace = Workspace()

    def most_violated(
        self, w: np.ndarray, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, float, float]:
        """``(a, b, xi)``: the most violated constraint ``w . a >= b - xi`` at ``w``, its slack;
        of the problem restricted to the samples ``rows`` when given (a stochastic step)."""
        X, is_pos, coef_true = self.X, self.is_pos, self.coef_true
        if rows is not None:
            X, is_pos = X[rows], is_pos[rows]
            coef_true = ground_truth_coef(is_pos, self.loss)
        scores = X @ w
        self.last_scores = scores
        if self.lai_callback is not None:
            self.lai_callback(scores, is_pos)
        ws = self.workspace
        if not self.lai_times:  # loads or compiles the kernels: run once untimed, see result
            start = time.perf_counter()
            lai(scores, is_pos, loss=self.loss, method=self.method, workspace=ws)
            first = time.perf_counter() - start
        start = time.perf_counter()
        res = lai(scores, is_pos, loss=self.loss, method=self.method, workspace=ws)
        self.lai_times.append(time.perf_counter() - start)
        if len(self.lai_times) == 1:
            self.lai_compile_time = max(0.0, first - self.lai_times[0])
        a = np.asarray(X.T @ (coef_true - res.coef)).ravel()
        return a, res.loss, res.objective - res.ground_truth_F

    def primal(self, w: np.ndarray, xi: float) -> float:
        """``1/2 |w|^2 + C xi``."""
        return 0.5 * (w @ w) + self.C * xi

    def log(self, objective: float, gap: float) -> None:
        """Record one iteration and tell the callback."""
        self.objective.append(float(objective))
        self.gap.append(float(gap))
        if self.callback is not None:
            self.callback(
                Progress(len(self.objective), self.objective[-1], self.gap[-1], self.last_scores)
            )

    def result(self, w: np.ndarray, converged: bool) -> SolverResult:
        """The run's record as a `SolverResult` with weights ``w``."""
        return SolverResult(
            w,
            np.array(self.objective),
            np.array(self.gap),
            np.array(self.lai_times),
            len(self.objective),
            converged,
            self.lai_compile_time,
        )


def _check_X(X, dense_dtypes):
    if sp.issparse(X):
        X = check_array(X, accept_sparse="csr", dtype=np.float64, input_name="X")
        return X.tocsr()
    return check_array(X, dtype=list(dense_dtypes), order="C", input_name="X")


def check_positive(name: str, value: Any, allow_zero: bool = False) -> float:
    """`value` as a float, checked finite and positive (or zero, if `allow_zero`).

    Parameters
    ----------
    name : str
        The parameter's name, for the error.
    value : Any
        The value given.
    allow_zero : bool, default False
        Whether zero is allowed.

    Returns
    -------
    float
        The value.

    Raises
    ------
    ValueError
        If `value` is not a finite real number > 0 (>= 0 with `allow_zero`).

    Examples
    --------
    >>> check_positive("C", 10)
    10.0
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not np.isfinite(float(value)) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite real number {bound}; got {value!r}.")
    return float(value)
