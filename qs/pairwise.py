"""The pairwise RankSVM (SVM-rank's model): a linear SVM on the differences of documents of
one query, no pair written out.

SVM-rank (Joachims 2002, 2006) asks ``w . (x_i - x_j) >= 1`` of every pair of documents
``i, j`` of one query with grade ``y_i > y_j``. `PairwiseRankSVM` minimises the
primal with the squared hinge (Chapelle and Keerthi 2010),

``1/2 |w|^2 + (C / Q) sum_q sum_{i, j in q: y_i > y_j} max(0, 1 - w . (x_i - x_j))^2``,

``Q`` the queries that hold a pair, as SVM-rank scales its ``C`` (SVMstruct's ``C / n`` with
one example per query). It is LinearSVC's squared hinge (its default loss, liblinear's L2-SVM)
on the explicit pair differences with ``C / Q``, no intercept. The squared hinge is smooth
and the primal strongly convex, so a quasi-Newton method (scipy's L-BFGS-B) converges to
the unique optimum, from the loss and its gradient alone: no working set of pairs, no QP,
while the hinge's kink would need a cutting-plane or subgradient method. The loss and
gradient take one compiled pass per query over its documents sorted by score: in that order
the pairs whose margin is below 1 form a sliding window, summed per grade in a Fenwick tree
(``O(n log n + n log L)`` per query of ``n`` documents and ``L`` grades, against ``O(n^2)``
pairs).
"""

import numbers

import numpy as np
import scipy.optimize
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from qs._numba import jit
from qs.metrics import ndcg_at_k
from qs.ssvm.queries import query_offsets

__all__ = ["PairwiseRankSVM", "pairwise_squared_hinge"]


def pairwise_squared_hinge(scores, levels, offsets):
    """The summed squared hinge of every ordered pair of one query, and its gradient.

    Parameters
    ----------
    scores : array-like of float, shape (n_documents,)
        The documents' scores, the queries one after another.
    levels : array-like of int, shape (n_documents,)
        Each document's grade as an index into the sorted grades (0 the lowest).
    offsets : array-like of int, shape (n_queries + 1,)
        Where each query starts, then ``n_documents``.

    Returns
    -------
    loss : float
        ``sum_q sum_{i, j in q: levels_i > levels_j} max(0, 1 - scores_i + scores_j)^2``.
    grad : ndarray of shape (n_documents,)
        Its gradient with respect to each score.
    pairs : ndarray of int64, shape (n_queries,)
        The ordered pairs of each query (documents of different grades).

    Examples
    --------
    >>> from qs.pairwise import pairwise_squared_hinge
    >>> loss, grad, pairs = pairwise_squared_hinge([0.5, 0.0, 2.0], [1, 0, 0], [0, 3])
    >>> float(loss), grad.tolist(), pairs.tolist()
    (6.5, [-6.0, 1.0, 5.0], [2])
    """
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    levels = np.ascontiguousarray(levels, dtype=np.int64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    grad = np.zeros(scores.size)
    pairs = np.zeros(offsets.size - 1, dtype=np.int64)
    n_levels = int(levels.max(initial=-1)) + 1
    loss = _squared_hinge(scores, levels, offsets, n_levels, grad, pairs)
    return loss, grad, pairs


@jit
def _add(tree, at, value):
    """Fenwick tree: add ``value`` at level ``at`` (0-based)."""
    i = at + 1
    while i < tree.size:
        tree[i] += value
        i += i & -i


@jit
def _below(tree, at):
    """Fenwick tree: the sum over the levels below ``at``."""
    total = 0.0
    i = at
    while i > 0:
        total += tree[i]
        i -= i & -i
    return total


@jit
def _squared_hinge(scores, levels, offsets, n_levels, grad, pairs):
    """Loss and gradient (into ``grad``) of `pairwise_squared_hinge`, query by query:
    a sweep down the scores sums each document's hinges against the lower grades within a
    margin of 1 below it; a sweep up sums its hinges against the higher grades within a
    margin of 1 above it. Three Fenwick trees over the grades (count, sum, sum of squares of
    the window's scores) are emptied after each query by subtracting what was added."""
    count = np.zeros(n_levels + 1)
    total = np.zeros(n_levels + 1)
    square = np.zeros(n_levels + 1)
    per_level = np.zeros(n_levels, dtype=np.int64)
    loss = 0.0
    for q in range(offsets.size - 1):
        a, b = offsets[q], offsets[q + 1]
        if b - a < 2:
            continue
        s = scores[a:b]
        lv = levels[a:b]
        n = b - a
        seen = 0
        for k in range(n):
            seen += per_level[lv[k]]
            per_level[lv[k]] += 1
        pairs[q] = seen  # pairs of equal grade
        for k in range(n):
            per_level[lv[k]] = 0
        pairs[q] = n * (n - 1) // 2 - pairs[q]
        if pairs[q] == 0:
            continue
        order = np.argsort(-s)  # descending scores
        p = 0
        for t in range(n):  # i as the higher document: j below, s_j > s_i - 1
            i = order[t]
            while p < n and s[order[p]] > s[i] - 1.0:
                j = order[p]
                _add(count, lv[j], 1.0)
                _add(total, lv[j], s[j])
                _add(square, lv[j], s[j] * s[j])
                p += 1
            c = _below(count, lv[i])
            if c > 0:
                m = 1.0 - s[i]
                sj = _below(total, lv[i])
                loss += c * m * m + 2.0 * m * sj + _below(square, lv[i])
                grad[a + i] -= 2.0 * (c * m + sj)
        for t in range(p):
            j = order[t]
            _add(count, lv[j], -1.0)
            _add(total, lv[j], -s[j])
            _add(square, lv[j], -s[j] * s[j])
        p = n - 1
        for t in range(n - 1, -1, -1):  # j as the lower document: i above, s_i < s_j + 1
            j = order[t]
            while p >= 0 and s[order[p]] < s[j] + 1.0:
                i = order[p]
                _add(count, lv[i], 1.0)
                _add(total, lv[i], s[i])
                p -= 1
            c = _below(count, n_levels) - _below(count, lv[j] + 1)
            if c > 0:
                si = _below(total, n_levels) - _below(total, lv[j] + 1)
                grad[a + j] += 2.0 * (c * (1.0 + s[j]) - si)
        for t in range(n - 1, p, -1):
            i = order[t]
            _add(count, lv[i], -1.0)
            _add(total, lv[i], -s[i])
    return loss


class PairwiseRankSVM(BaseEstimator):
    """Linear pairwise RankSVM over queries (SVM-rank's model, squared hinge).

    Minimises ``1/2 |w|^2 + (C / Q) sum_q sum_{y_i > y_j} max(0, 1 - w . (x_i - x_j))^2``
    over the pairs of documents of one query with different grades, by L-BFGS-B on the
    primal; the pairs are never written out (see `qs.pairwise`).

    Parameters
    ----------
    C : float > 0, default 1.0
        Weight of the pairs' summed squared hinge, divided by ``Q``, the queries that hold
        a pair (SVM-rank's scaling).
    tol : float > 0, default 1e-6
        L-BFGS-B's ``gtol``: it stops when every entry of the projected gradient is below.
    max_iter : int >= 1, default 1000
        Cap on L-BFGS-B's iterations.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features)
        The weights.
    n_iter_ : int
        L-BFGS-B's iterations.
    converged_ : bool
        Whether L-BFGS-B met its tolerance.
    n_queries_ : int
        The queries that hold a pair.
    n_pairs_ : int
        Their pairs.
    objective_ : float
        The primal objective at `coef_`.
    n_features_in_ : int
        The number of features seen in `fit`.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.pairwise import PairwiseRankSVM
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5], [0.5, 0.0]])
    >>> model = PairwiseRankSVM(C=10).fit(X, [2, 0, 1, 0], groups=[1, 1, 2, 2])
    >>> bool(model.decision_function(X)[0] > model.decision_function(X)[1])
    True
    """

    def __init__(self, *, C=1.0, tol=1e-6, max_iter=1000):
        self.C = C
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, X, y, groups):
        """Train on the documents of many queries.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The features.
        y : array-like of shape (n_samples,)
            Numeric relevance grades.
        groups : array-like of shape (n_samples,)
            One query id per sample.

        Returns
        -------
        self : PairwiseRankSVM
            The fitted estimator.

        Raises
        ------
        ValueError
            On a bad parameter, grades that are not numeric, ``groups`` not of ``y``'s shape,
            or no query holding documents of different grades.

        Examples
        --------
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5], [0.5, 0.0]])
        >>> y, groups = [2, 0, 1, 0], [1, 1, 2, 2]
        >>> model = PairwiseRankSVM(C=10).fit(X, y, groups)
        >>> model.n_queries_, model.n_pairs_, model.coef_.shape
        (2, 2, (1, 2))
        """
        for name, low in (("C", 0), ("tol", 0)):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, numbers.Real)
                or not value > low
                or not np.isfinite(value)
            ):
                raise ValueError(f"{name} must be a positive number; got {value!r}.")
        if (
            isinstance(self.max_iter, bool)
            or not isinstance(self.max_iter, numbers.Integral)
            or self.max_iter < 1
        ):
            raise ValueError(f"max_iter must be a positive integer; got {self.max_iter!r}.")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        if y.dtype.kind not in "fiub":
            raise ValueError(f"y holds numeric relevance grades; got dtype {y.dtype}.")
        groups = np.asarray(groups)
        if groups.shape != y.shape:
            raise ValueError(
                f"groups must hold one query id per sample ({y.size}); got shape {groups.shape}."
            )
        order, offsets = query_offsets(groups)
        if order is not None:
            X, y = X[order], y[order]
        levels = np.unique(y, return_inverse=True)[1].reshape(-1)
        _, _, pairs = pairwise_squared_hinge(np.zeros(y.size), levels, offsets)
        self.n_queries_, self.n_pairs_ = int((pairs > 0).sum()), int(pairs.sum())
        if self.n_queries_ == 0:
            raise ValueError("no query holds documents of different grades: nothing to rank.")
        weight = self.C / self.n_queries_

        def objective(w):
            scores = np.asarray(X @ w).ravel()
            loss, grad, _ = pairwise_squared_hinge(scores, levels, offsets)
            g = w + weight * np.asarray(X.T @ grad).ravel()
            return 0.5 * w @ w + weight * loss, g

        res = scipy.optimize.minimize(
            objective,
            np.zeros(X.shape[1]),
            jac=True,
            method="L-BFGS-B",
            options={"gtol": self.tol, "maxiter": self.max_iter, "ftol": 64 * np.finfo(float).eps},
        )
        self.coef_ = res.x[None, :]
        self.objective_ = float(res.fun)
        self.n_iter_ = int(res.nit)
        self.converged_ = bool(res.success)
        return self

    def decision_function(self, X):
        """Score of each sample, ``X @ coef_[0]``; higher ranks first within a query.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The features.

        Returns
        -------
        ndarray of shape (n_samples,)
            The scores.

        Examples
        --------
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5], [0.5, 0.0]])
        >>> y, groups = [2, 0, 1, 0], [1, 1, 2, 2]
        >>> scores = PairwiseRankSVM(C=10).fit(X, y, groups).decision_function(X)
        >>> bool(scores[0] > scores[1]), bool(scores[2] > scores[3])
        (True, True)
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        return np.asarray(X @ self.coef_[0]).ravel()

    def score(self, X, y, groups=None):
        """Mean NDCG over the queries of the scores' rankings, gain ``2^y - 1``.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The features.
        y : array-like of shape (n_samples,)
            The relevance grades.
        groups : array-like of shape (n_samples,) or None, default None
            One query id per sample; None: one query.

        Returns
        -------
        float
            The mean NDCG; higher is better.

        Examples
        --------
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5], [0.5, 0.0]])
        >>> y, groups = [2, 0, 1, 0], [1, 1, 2, 2]
        >>> PairwiseRankSVM(C=10).fit(X, y, groups).score(X, y, groups)
        1.0
        """
        groups = np.zeros(len(y)) if groups is None else groups
        return ndcg_at_k(y, self.decision_function(X), groups)
