"""The ranking structured SVM over queries (SVM-map's setting, Yue et al. 2007).

Each query ``q`` (its documents ``offsets[q]:offsets[q + 1]`` of ``X``) is one structured
example; the primal is

``min_w 1/2 |w|^2 + (C / Q) sum_q xi_q``,
``xi_q = max_R Delta_q(R) + w . (Psi_q(R) - Psi_q(R*_q))``,

over the ``Q`` queries that have a relevant and a non-relevant document (the others have
no ranking and add nothing): SVMstruct's ``C / n`` with one example per query. It is solved
in its 1-slack form, ``1/2 |w|^2 + C xi`` with ``xi`` the mean of the ``xi_q``, whose most
violated constraint is one `qs.inference.lai_queries` call over every query: the
joint feature map ``Psi = sum_q Psi_q`` and the loss averaged over the queries. With one
query it is the structured SVM of `qs.ssvm`.

Solvers: the 1-slack ones of `qs.ssvm` on that oracle, and block-coordinate
Frank-Wolfe over the queries (`block_frank_wolfe`, Lacoste-Julien et al. 2013): one
compiled pass visits the queries in order, each step an LAI of one query and an exact line
search on its block, then one ``lai_queries`` call at the pass's weights gives the primal
objective and the duality gap.
"""

import time

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from qs._numba import jit, unowned
from qs.inference._batch_rows import row_loss, row_method, solve_row, work_arrays
from qs.inference.queries import lai_queries
from qs.ssvm._problem import Problem
from qs.ssvm.cutting_plane import solve as cutting_plane_loop
from qs.ssvm.frank_wolfe import solve as frank_wolfe_loop
from qs.ssvm.subgradient import solve as subgradient_loop

__all__ = [
    "QUERY_SOLVERS",
    "QueryProblem",
    "block_frank_wolfe",
    "query_counts",
    "query_offsets",
    "query_scores",
    "solve_queries",
]

#: the score kernel's independent partial sums per row: they let the compiler vectorise
#: the float64 sums of float32 features, which one running sum (a chain of dependent
#: additions) does not
SCORE_LANES = 8


def query_offsets(groups):
    """The order that makes each query's samples contiguous, and the queries' offsets.

    Parameters
    ----------
    groups : array-like of shape (n_samples,)
        One query id per sample: any hashable numbers or strings.

    Returns
    -------
    order : ndarray of int or None
        None when every query's samples are already contiguous, else the stable
        permutation that makes them so.
    offsets : ndarray of shape (n_queries + 1,), int64
        The queries' bounds in that order: in order of first appearance when contiguous,
        of sorted id otherwise.

    Raises
    ------
    ValueError
        When ``groups`` is not 1-D or is empty.

    Examples
    --------
    >>> query_offsets([7, 7, 3])
    (None, array([0, 2, 3]))
    >>> order, offsets = query_offsets(["b", "b", "a", "b"])
    >>> order.tolist(), offsets.tolist()
    ([2, 0, 1, 3], [0, 1, 4])
    """
    groups = np.asarray(groups)
    if groups.ndim != 1:
        raise ValueError(
            f"groups must be a 1-D array of one query id per sample; got shape {groups.shape}."
        )
    if groups.size == 0:
        raise ValueError("groups is empty; give one query id per sample.")
    starts = np.flatnonzero(groups[1:] != groups[:-1]) + 1
    runs = starts.size + 1
    if runs == np.unique(groups).size:
        return None, np.concatenate([[0], starts, [groups.size]]).astype(np.int64)
    order = np.argsort(groups, kind="stable")
    ids = groups[order]
    starts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    return order, np.concatenate([[0], starts, [groups.size]]).astype(np.int64)


def query_counts(is_pos, offsets):
    """The relevant documents and all documents of each query.

    Parameters
    ----------
    is_pos : ndarray of shape (n_documents,), bool
        True at the relevant documents.
    offsets : ndarray of shape (n_queries + 1,), int
        The queries' bounds.

    Returns
    -------
    relevant : ndarray of shape (n_queries,), int64
        The relevant documents of each query.
    documents : ndarray of shape (n_queries,), int64
        The documents of each query.

    Examples
    --------
    >>> relevant, documents = query_counts(np.array([True, False, True, False, False]),
    ...                                    np.array([0, 2, 5]))
    >>> relevant.tolist(), documents.tolist()
    ([1, 1], [2, 3])
    """
    sizes = np.diff(offsets)
    relevant = np.add.reduceat(np.append(is_pos.astype(np.int64), 0), offsets[:-1])
    return np.where(sizes > 0, relevant, 0), sizes


def query_scores(X, w):
    """``X @ w`` as float64 scores, one per document, without a float64 copy of float32 ``X``.

    A float32 ``X`` is read as it is, each product and sum taken in float64; any other
    ``X`` by its own product.

    Parameters
    ----------
    X : ndarray or scipy sparse matrix of shape (n_documents, n_features)
        The features.
    w : array-like of shape (n_features,)
        The weights.

    Returns
    -------
    ndarray of shape (n_documents,), float64
        The scores.

    Examples
    --------
    >>> X = np.array([[1.0, 0.5], [0.25, 2.0]], dtype=np.float32)
    >>> query_scores(X, [2.0, 1.0])
    array([2.5, 2.5])
    """
    if isinstance(X, np.ndarray) and X.dtype == np.float32:
        return _float32_scores(np.ascontiguousarray(X), np.asarray(w, dtype=np.float64))
    return np.asarray(X @ w, dtype=np.float64).ravel()


def query_transposed(X, g):
    """``X^T g`` as float64, one per feature: for a float32 ``X`` each product and sum in
    float64 (`_transposed_product`), without a float64 copy of ``X``."""
    if isinstance(X, np.ndarray) and X.dtype == np.float32:
        return _transposed_product(np.ascontiguousarray(X), np.asarray(g, dtype=np.float64))
    return np.asarray(X.T @ g, dtype=np.float64).ravel()


@jit
def _float32_scores(X, w):
    """``X @ w`` of float32 rows, each product and sum in float64: `SCORE_LANES` partial
    sums over the features (feature ``j`` in sum ``j % SCORE_LANES``), added pairwise,
    then the features past the last full group of lanes."""
    n, d = X.shape
    out = np.empty(n)
    partial = np.empty(SCORE_LANES)
    top = d - d % SCORE_LANES
    for i in range(n):
        x = X[i]
        partial[:] = 0.0
        for j in range(0, top, SCORE_LANES):
            for lane in range(SCORE_LANES):
                partial[lane] += np.float64(x[j + lane]) * w[j + lane]
        width = SCORE_LANES
        while width > 1:  # pairwise: lane k gets lane k + width / 2
            width //= 2
            for lane in range(width):
                partial[lane] += partial[lane + width]
        total = partial[0]
        for j in range(top, d):
            total += np.float64(x[j]) * w[j]
        out[i] = total
    return out


@jit
def _transposed_product(X, g):
    """``X^T g`` of float32 rows, each product and sum in float64, rows in order (a row
    of ``g`` zero adds nothing and is skipped)."""
    n, d = X.shape
    out = np.zeros(d)
    for i in range(n):
        c = g[i]
        if c != 0.0:
            for j in range(d):
                out[j] += np.float64(X[i, j]) * c
    return out


class QueryProblem(Problem):
    """The structured SVM over queries: a problem whose oracle is one `lai_queries` call.

    The call (`qs.inference.lai_queries`) covers every query. ``n_queries`` counts the
    queries that train (a relevant and a non-relevant document). A dense float32 ``X`` is
    kept float32 (the scores and the joint feature map summed in float64 from it); other
    dense dtypes are read as float64.

    Parameters
    ----------
    X : ndarray or scipy sparse matrix of shape (n_documents, n_features)
        The features, the queries one after another.
    labels : array-like of shape (n_documents,)
        Binary relevance.
    offsets : array-like of shape (n_queries + 1,), int
        The queries' bounds.
    C : float
        The regularisation constant.
    loss : str
        "ap" or "ndcg".
    method : str
        The LAI method (a key of `qs.inference.METHODS`).
    tol : float
        The solvers' tolerance on the duality gap, relative to ``C``.
    max_iter : int
        The most iterations of a solver.
    callback : callable or None
        Called with each iteration's `qs.ssvm.Progress`.

    Raises
    ------
    ValueError
        For another loss, or when no query has both a relevant and a non-relevant
        document.

    Examples
    --------
    >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1]])
    >>> prob = QueryProblem(X, [1, 0, 1, 0, 0], [0, 2, 5], C=10.0, loss="ap",
    ...                     method="auto", tol=1e-3, max_iter=200, callback=None)
    >>> prob.n_queries, prob.trains.tolist()
    (2, [True, True])
    """

    dense_dtypes = (np.float64, np.float32)

    def __init__(self, X, labels, offsets, *, C, loss, method, tol, max_iter, callback):
        if loss not in ("ap", "ndcg"):
            raise ValueError(f"training over queries takes loss 'ap' or 'ndcg'; got {loss!r}.")
        super().__init__(
            X, labels, C=C, loss=loss, method=method, tol=tol, max_iter=max_iter, callback=callback
        )
        self.offsets = np.asarray(offsets, dtype=np.int64)
        relevant, sizes = query_counts(self.is_pos, self.offsets)
        self.trains = (relevant > 0) & (relevant < sizes)
        self.n_queries = int(self.trains.sum())
        if self.n_queries == 0:
            raise ValueError(
                "no query has both a relevant and a non-relevant document: nothing to rank."
            )

    def oracle(self, w):
        """The `lai_queries` result at ``w``, with the hinges' gradients; its time recorded.

        The first call also runs once untimed, to load or compile the kernels; the scores
        are kept in ``last_scores``.

        Parameters
        ----------
        w : ndarray of shape (n_features,)
            The weights.

        Returns
        -------
        QueriesResult
            Of `qs.inference.lai_queries`, with ``gradient=True`` and no ranks.

        Examples
        --------
        >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1]])
        >>> prob = QueryProblem(X, [1, 0, 1, 0, 0], [0, 2, 5], C=10.0, loss="ap",
        ...                     method="auto", tol=1e-3, max_iter=200, callback=None)
        >>> res = prob.oracle(np.zeros(2))
        >>> res.loss.tolist(), len(prob.lai_times)
        ([0.5, 0.6666666666666666], 1)
        """
        scores = query_scores(self.X, w)
        self.last_scores = scores
        call = (scores, self.is_pos, self.offsets)
        kwargs = {"loss": self.loss, "method": self.method, "gradient": True, "ranks": False}
        if not self.lai_times:  # loads or compiles the kernels: run once untimed
            start = time.perf_counter()
            lai_queries(*call, **kwargs)
            first = time.perf_counter() - start
        start = time.perf_counter()
        res = lai_queries(*call, **kwargs)
        self.lai_times.append(time.perf_counter() - start)
        if len(self.lai_times) == 1:
            self.lai_compile_time = max(0.0, first - self.lai_times[0])
        return res

    def most_violated(self, w, rows=None):
        """The most violated constraint of the 1-slack problem at ``w``.

        Parameters
        ----------
        w : ndarray of shape (n_features,)
            The weights.
        rows : None, default None
            Must be None: training over queries takes whole passes.

        Returns
        -------
        a : ndarray of shape (n_features,)
            The mean over the queries of ``Psi_q(R*) - Psi_q(R_q)``.
        b : float
            Their mean loss.
        xi : float
            Their mean hinge.

        Raises
        ------
        ValueError
            When ``rows`` is given.

        Examples
        --------
        >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1]])
        >>> prob = QueryProblem(X, [1, 0, 1, 0, 0], [0, 2, 5], C=10.0, loss="ap",
        ...                     method="auto", tol=1e-3, max_iter=200, callback=None)
        >>> a, b, xi = prob.most_violated(np.zeros(2))
        >>> a.shape, b, xi
        ((2,), 0.5833333333333333, 0.5833333333333333)
        """
        if rows is not None:
            raise ValueError("training over queries takes whole passes (no batch_size).")
        res = self.oracle(w)
        q = self.n_queries
        a = -query_transposed(self.X, res.coef) / q
        return a, float(res.loss.sum()) / q, float(res.hinge.sum()) / q


def block_frank_wolfe(prob, random_state=None):
    """Block-coordinate Frank-Wolfe over the queries of a `QueryProblem` with a dense ``X``.

    It passes over the queries, each pass in a new random order, until the duality gap is
    at most ``C * tol``; one `qs.inference.lai_queries` call per pass (at the pass's
    weights) records the primal objective and the gap.

    Parameters
    ----------
    prob : QueryProblem
        The problem, its ``X`` dense.
    random_state : int, numpy.random.Generator or None, default None
        The order of the queries; None: seed 0, so that a fit repeats.

    Returns
    -------
    SolverResult
        The weights and the run's record.

    Examples
    --------
    >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1]])
    >>> prob = QueryProblem(X, [1, 0, 1, 0, 0], [0, 2, 5], C=10.0, loss="ap",
    ...                     method="auto", tol=1e-3, max_iter=200, callback=None)
    >>> bool(block_frank_wolfe(prob).converged)
    True
    """
    if sp.issparse(prob.X):
        raise ValueError(
            "block_frank_wolfe takes a dense X; use another solver for sparse features."
        )
    X, d = prob.X, prob.X.shape[1]
    record, inc, loss_obj = row_method(prob.loss, prob.method)
    if record is None:
        raise ValueError(
            "block_frank_wolfe runs the compiled LAI methods; method 'brute' "
            "is for tests of lai_queries."
        )
    offsets = prob.offsets
    longest = int(np.diff(offsets).max())
    loss_rows = row_loss(loss_obj, longest, None)  # a built-in loss: no sizes read
    rng = check_random_state(0 if random_state is None else random_state)
    w = np.zeros(d)
    blocks = np.zeros((offsets.size - 1, d))  # each query's share of w
    block_loss = np.zeros(offsets.size - 1)  # and of the dual's loss term
    ell = np.zeros(1)
    out = np.empty((offsets.size - 1, 4))  # as lai_queries writes it
    valid = np.empty(offsets.size - 1, dtype=np.bool_)
    scores, coef = np.empty(longest), np.empty(longest)
    for it in range(prob.max_iter):
        _, _, xi = prob.most_violated(w)
        gap = w @ w + prob.C * (xi - ell[0])
        prob.log(prob.primal(w, xi), gap)
        converged = gap <= prob.C * prob.tol
        if converged or it == prob.max_iter - 1:
            break
        visit = rng.permutation(offsets.size - 1)
        _bcfw_pass(
            record,
            inc,
            loss_rows,
            X,
            prob.is_pos,
            offsets,
            visit,
            prob.trains,
            prob.C,
            prob.n_queries,
            w,
            blocks,
            block_loss,
            ell,
            scores,
            coef,
            out,
            valid,
            work_arrays(longest),
        )
    return prob.result(w, converged)


@jit
def _bcfw_pass(
    method,
    inc,
    loss,
    X,
    is_pos,
    offsets,
    visit,
    trains,
    C,
    n_queries,
    w,
    blocks,
    block_loss,
    ell,
    scores,
    coef,
    out,
    valid,
    work,
):
    """One pass of block-coordinate Frank-Wolfe over the queries that train, in the order
    ``visit``:
    ``w``, ``blocks`` (each query's share of ``w``), ``block_loss`` and ``ell[0]`` (their
    loss terms) updated in place. Scores are finite for finite ``X`` and ``w``. The rows
    are solved in views without an owner (`qs._numba.unowned`): no reference counted per
    query."""
    scores, coef, out, is_pos = unowned((scores, coef, out, is_pos))
    loss, work = unowned(loss), unowned(work)
    d = w.size
    no_rank = np.empty(0, dtype=np.int32)
    step = np.empty(d)
    scale = C / n_queries
    for t in range(visit.size):
        q = visit[t]
        if not trains[q]:
            continue
        a, b = offsets[q], offsets[q + 1]
        n = b - a
        s = scores[:n]
        for k in range(n):
            total = 0.0
            for j in range(d):
                total += X[a + k, j] * w[j]
            s[k] = total
        g = coef[:n]
        solved, _ = solve_row(method, inc, loss, q, s, is_pos[a:b], True, no_rank, g, out[q], work)
        valid[q] = solved
        # the vertex w_s = C / Q (Psi_q(R*) - Psi_q(R)) = -C / Q X_q^T g; step = w_q - w_s
        for j in range(d):
            step[j] = blocks[q, j]
        for k in range(n):
            c = scale * g[k]
            for j in range(d):
                step[j] += c * X[a + k, j]
        loss_s = out[q, 0] / n_queries
        num = -C * (block_loss[q] - loss_s)
        den = 0.0
        for j in range(d):
            num += step[j] * w[j]
            den += step[j] * step[j]
        gamma = 1.0 if den == 0.0 else min(1.0, max(0.0, num / den))
        for j in range(d):
            w[j] -= gamma * step[j]
            blocks[q, j] -= gamma * step[j]
        ell[0] += gamma * (loss_s - block_loss[q])
        block_loss[q] += gamma * (loss_s - block_loss[q])


#: solver name -> the loop on a `QueryProblem`
QUERY_SOLVERS = {
    "cutting_plane": lambda prob, qp_solver, seed: cutting_plane_loop(
        prob, prob.X.shape[1], qp_solver
    ),
    "frank_wolfe": lambda prob, qp_solver, seed: frank_wolfe_loop(prob, prob.X.shape[1]),
    "subgradient": lambda prob, qp_solver, seed: subgradient_loop(prob, prob.X.shape[1]),
    "block_frank_wolfe": lambda prob, qp_solver, seed: block_frank_wolfe(prob, seed),
}


def solve_queries(
    X,
    labels,
    offsets,
    *,
    solver="cutting_plane",
    C=1.0,
    loss="ap",
    method="auto",
    tol=1e-3,
    max_iter=1000,
    qp_solver="daqp",
    random_state=None,
    callback=None,
):
    """Train the structured SVM over the queries of ``X`` by one of `QUERY_SOLVERS`.

    Parameters
    ----------
    X : ndarray or scipy sparse matrix of shape (n_documents, n_features)
        The features, the queries one after another.
    labels : array-like of shape (n_documents,)
        Binary relevance.
    offsets : array-like of shape (n_queries + 1,), int
        The queries' bounds.
    solver : str, default "cutting_plane"
        A key of `QUERY_SOLVERS`.
    C : float, default 1.0
        The regularisation constant.
    loss : str, default "ap"
        "ap" or "ndcg".
    method : str, default "auto"
        The LAI method.
    tol : float, default 1e-3
        The tolerance on the duality gap, relative to ``C``.
    max_iter : int, default 1000
        The most iterations.
    qp_solver : str, default "daqp"
        The ``qpsolvers`` backend of the cutting plane.
    random_state : int, numpy.random.Generator or None, default None
        Seeds block-coordinate Frank-Wolfe's order of queries (the others draw nothing).
    callback : callable or None, default None
        Called with each iteration's `qs.ssvm.Progress`.

    Returns
    -------
    result : SolverResult
        The weights and the run's record.
    problem : QueryProblem
        The problem trained.

    Raises
    ------
    ValueError
        For an unknown solver, or as `QueryProblem` refuses its data.

    Examples
    --------
    >>> X = np.array([[2.0, 0.1], [1.5, -0.3], [0.2, 0.4], [-0.5, 0.2], [-1.0, -0.1]])
    >>> res, prob = solve_queries(X, [1, 0, 1, 0, 0], [0, 2, 5], C=10.0)
    >>> bool(res.converged), prob.n_queries
    (True, 2)
    """
    if solver not in QUERY_SOLVERS:
        raise ValueError(f"solver must be one of {sorted(QUERY_SOLVERS)}; got {solver!r}.")
    prob = QueryProblem(
        X,
        labels,
        offsets,
        C=C,
        loss=loss,
        method=method,
        tol=tol,
        max_iter=max_iter,
        callback=callback,
    )
    return QUERY_SOLVERS[solver](prob, qp_solver, random_state), prob
