"""Loss-augmented inference for a batch of queries in one call: :func:`lai_batch`.

A mini-batch of a deep net ranks several queries at once (for instance the 10 one-vs-rest
classes of a CIFAR-10 batch). ``lai_batch`` takes their scores as rows of one (Q, n) array
and solves them in one compiled kernel that loops over the queries: one Python call per
mini-batch instead of Q. Large batches are cut into blocks of queries run on threads (the
kernels release the GIL); small ones run in the calling thread, where a thread hand-off would
cost more than the work (measured: numba's ``prange`` took 9 ms for 10 queries of 256 samples
on 2 busy cores, the plain loop 0.05 ms). Each query is solved by the same
per-query kernel as :func:`qs.inference.lai` with the same method, so objectives and ranks
are those of ``lai`` row by row.

A query without a positive or without a negative has no ranking loss: it is skipped (loss,
objective and F zero, coefficients zero, ``valid`` False) rather than refused, since small
mini-batches meet such queries. Scores must be finite in every row, skipped or not.
"""

import functools
from dataclasses import dataclass

import numba
import numpy as np

from qs._numba import jit, jit_generic
from qs.inference import AUTO_SORT_BELOW, AUTO_SORT_PER_POSITIVE, _resolve, lai
from qs.inference._core import OK, failed, label_check, scan_and_gather
from qs.inference.bucket import MAX_BUCKETS, _bucket, _map, n_buckets_for
from qs.inference.bucket_sort import _bucket_sort
from qs.inference.qs import _qs, _sort_dc
from qs.inference.scan import _scan_sorted
from qs.inference.search import _search_sorted
from qs.inference.zero_one import zero_one_lai
from qs.losses import LOSSES

__all__ = ["lai_batch", "BatchResult"]

#: the losses ``lai_batch`` takes (their loss values are computed inside the kernel)
BATCH_LOSSES = ("ap", "ndcg", "01")
#: batches of at least this many samples (all queries together) run on threads, in blocks of
#: whole queries. As for one large query (:data:`qs.inference.bucket.THREADED_MIN`): on 2
#: cores shared with other jobs, threads lost at every size tried (16 x 10^5 samples: 141 vs
#: 130 ms; 64 x 2048: 12.1 vs 7.7 ms)
THREADED_MIN = 1 << 21


@dataclass(frozen=True)
class BatchResult:
    """Per-query results of :func:`lai_batch`, row ``q`` for query ``q``.

    rank : int32 (Q, n): interleaving rank of each negative at its input place, 0 at the
        positives (and everywhere in skipped rows and for the 0-1 loss).
    coef : float64 (Q, n): ``coef(R_bar)`` as in :class:`qs.inference.LAIResult`, or with
        ``gradient=True`` ``coef(R_bar) - coef(R*)``, the gradient of the structured hinge
        ``objective - ground_truth_F`` with respect to the scores.
    loss, objective, ground_truth_F : float64 (Q,), as in ``LAIResult``.
    valid : bool (Q,): the query has a positive and a negative (others are skipped, zeros).
    """

    rank: np.ndarray
    coef: np.ndarray
    loss: np.ndarray
    objective: np.ndarray
    ground_truth_F: np.ndarray
    valid: np.ndarray

    @property
    def hinge(self):
        """The structured hinge ``objective - ground_truth_F`` per query (0 if skipped)."""
        return self.objective - self.ground_truth_F


def lai_batch(scores, labels, loss="ap", method="auto", *, gradient=False):
    """Loss-augmented inference of each row of ``scores`` (one query per row), in one call.

    Parameters
    ----------
    scores : array (Q, n) of finite numbers; float64 C-contiguous rows are read in place,
        anything else is converted once.
    labels : array (Q, n): 1/True positive, 0/-1/False negative.
    loss : "ap", "ndcg" or "01".
    method : a method of :data:`qs.inference.METHODS` that supports ``loss``.
    gradient : if True, ``coef`` holds ``coef(R_bar) - coef(R*)`` instead of ``coef(R_bar)``.

    Returns a :class:`BatchResult`. Ties are broken as in :func:`qs.inference.lai`.
    """
    if not (isinstance(loss, str) and loss in BATCH_LOSSES):
        raise ValueError(f"lai_batch takes loss in {list(BATCH_LOSSES)}; got {loss!r}.")
    loss_obj, method = _resolve(loss, method)
    scores = _as_scores2d(scores)
    is_pos = _as_positive_mask2d(labels, scores.shape)
    q, n = scores.shape
    n_pos = is_pos.sum(axis=1, dtype=np.int64)
    rank = np.zeros((q, n), dtype=np.int32)
    coef = np.empty((q, n))
    out = np.zeros((q, 3))  # loss, objective, ground-truth F
    if method == "brute":  # the exhaustive oracle: per query, for tests on tiny inputs
        _brute_rows(scores, is_pos, n_pos, loss, gradient, rank, coef, out)
    else:
        if method == "zero_one":
            kernel, per_query, shared = _zero_one_batch, (), ()
        else:
            solve, n_buckets = _plan(method, n_pos, n)
            kernel, per_query, shared = _kernel(solve, loss_obj), (n_buckets,), _discount(loss, n)

        def rows(a, b):
            kernel(scores[a:b], is_pos[a:b], n_pos[a:b], *(x[a:b] for x in per_query), *shared,
                   gradient, rank[a:b], coef[a:b], out[a:b])

        if scores.size < THREADED_MIN or q == 1:
            rows(0, q)
        else:
            blocks = np.linspace(0, q, min(q, 2 * numba.get_num_threads()) + 1).astype(np.int64)
            _map(rows, blocks[:-1], blocks[1:])
    return BatchResult(rank, coef, out[:, 0], out[:, 1], out[:, 2], (n_pos > 0) & (n_pos < n))


def _as_scores2d(scores):
    arr = np.asarray(scores)
    if arr.ndim != 2:
        raise ValueError(f"scores must be a 2-D array of shape (queries, samples); got shape "
                         f"{arr.shape}.")
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"scores must be numeric; got dtype {arr.dtype}.")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    finite = np.isfinite(arr)
    if not finite.all():
        qq, kk = np.argwhere(~finite)[0]
        raise ValueError(f"scores must be finite; got {arr[qq, kk]!r} at query {qq}, sample "
                         f"{kk}. Remove or impute NaN/inf scores before inference.")
    return arr


def _as_positive_mask2d(labels, shape):
    """Labels (bool, or numbers in {1, 0, -1}) as a uint8 mask of ``shape``."""
    arr = np.asarray(labels)
    if arr.shape != shape:
        raise ValueError(f"scores and labels must have the same shape; got scores {shape} and "
                         f"labels {arr.shape}.")
    if arr.dtype == np.bool_:
        return np.ascontiguousarray(arr).view(np.uint8)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"labels must be bool or numeric (1 positive, 0 or -1 negative); got "
                         f"dtype {arr.dtype}.")
    arr = np.ascontiguousarray(arr)
    bad, _ = label_check(arr.reshape(-1))
    if bad >= 0:
        qq, kk = divmod(int(bad), shape[1])
        raise ValueError(f"labels must be binary: 1 (or True) for a positive, 0 or -1 (or False) "
                         f"for a negative; got {arr[qq, kk]!r} at query {qq}, sample {kk}.")
    return (arr == 1).view(np.uint8)


def _plan(method, n_pos, n):
    """(solver name per query, bucket count per query): "auto" picks per query as
    :func:`qs.inference.lai` does (bucket_sort for small inputs, bucket for large ones)."""
    n_neg = n - n_pos
    if method == "auto":
        small = n_neg < np.maximum(AUTO_SORT_BELOW, AUTO_SORT_PER_POSITIVE * n_pos)
        method = "bucket_sort" if small.all() else "auto"
    if method == "bucket_sort":  # as bucket_sort_lai: about one bucket per negative
        return method, np.clip(n_neg, 16, MAX_BUCKETS)
    if method in ("bucket", "auto"):
        large = [n_buckets_for(p, m) if p and m else 16 for p, m in zip(n_pos, n_neg)]
        if method == "bucket":
            return method, np.array(large, dtype=np.int64)
        # per query: a positive count marks a bucket_sort query, a negative one a bucket query
        return method, np.where(small, np.clip(n_neg, 16, MAX_BUCKETS), -np.array(large))
    return method, np.zeros(n_pos.size, dtype=np.int64)


@functools.lru_cache(maxsize=4)
def _discount(loss, n):
    """NDCG's discount ``D(1..n+1)`` and its prefix sums ``C(P) = sum_{k<=P} D(k)`` (index
    P-1), shared by all queries of n samples; empty for the other losses."""
    if loss != "ndcg":
        return np.zeros(0), np.zeros(0)
    d = LOSSES["ndcg"].discount(np.arange(1, n + 2))
    return d, np.cumsum(d)


@jit
def _ndcg_params(table, ideal, n_pos):
    """The increment table of :meth:`qs.losses.NDCGLoss.prepare` for P positives:
    ``(D(t+1) - D(t)) / C(P)`` at ``t = 1..n``. (C is a running sum here, a pairwise one
    there: equal to rounding.)"""
    c = ideal[n_pos - 1]
    params = np.empty(table.size)
    params[0] = 0.0
    for t in range(1, table.size):
        params[t] = (table[t] - table[t - 1]) / c
    return params


@jit
def _ndcg_value(n_above, table, ideal):
    """1 - NDCG of the interleaving ``n_above`` (as :meth:`qs.losses.NDCGLoss.value`)."""
    n_pos = n_above.size
    dcg = 0.0
    for k in range(n_pos):
        dcg += table[k + n_above[k]]
    return 1.0 - dcg / ideal[n_pos - 1]


@jit
def _ap_value(n_above, table, ideal):
    """1 - AP of the interleaving ``n_above`` (as :meth:`qs.losses.APLoss.value`)."""
    total = 0.0
    for k in range(n_above.size):
        m = n_above[k]
        total += m / (k + 1.0 + m)
    return total / n_above.size


@jit
def _no_params(table, ideal, n_pos):
    return np.zeros(0)


_LOSS_KERNELS = {"ap": (_no_params, _ap_value), "ndcg": (_ndcg_params, _ndcg_value)}


def _sorted_solver(kernel):
    """A per-query solver that sorts the negatives (np.sort) and runs ``kernel`` on them, as
    :func:`qs.inference._prepare.run_sorted` does."""

    @jit_generic
    def solve(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef):
        v = np.empty(scores.size - n_pos)
        err, where, sum_pos, sum_neg, pos_sorted, pos_index = scan_and_gather(scores, is_pos,
                                                                              n_pos, v)
        if err != OK:
            return failed(err, where)
        v = np.sort(v)[::-1].copy()
        rk = np.empty(v.size, dtype=np.int64)
        return kernel(inc, params, v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef,
                      sum_pos, sum_neg)

    return solve


@jit_generic
def _solve_qs(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef):
    n = neg_rank.size
    return _qs(inc, params, scores, is_pos, n_pos, neg_rank, coef, np.empty(n),
               np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64))


@jit_generic
def _solve_auto(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef):
    if n_buckets > 0:
        return _bucket_sort(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef)
    return _bucket(inc, params, scores, is_pos, n_pos, -n_buckets, neg_rank, coef)


_SOLVERS = {
    "auto": _solve_auto,
    "bucket_sort": _bucket_sort,
    "bucket": _bucket,
    "qs": _solve_qs,
    "sort_dc": _sorted_solver(_sort_dc),
    "yue": _sorted_solver(_scan_sorted),
    "chakrabarti": _sorted_solver(_scan_sorted),
    "search": _sorted_solver(_search_sorted),
}

_BATCH_SOURCE = """
def batch(scores, is_pos, n_pos, n_buckets, table, ideal, gradient, rank, coef, out):
    n = scores.shape[1]
    for q in range(scores.shape[0]):
        p = n_pos[q]
        m = n - p
        if p == 0 or m == 0:
            coef[q, :] = 0.0
            continue
        neg_rank = np.empty(m, dtype=np.int32)
        _, _, sum_pos, sum_neg, n_above, f = solve(
            inc, params(table, ideal, p), scores[q], is_pos[q], p, n_buckets[q], neg_rank, coef[q])
        value = loss_value(n_above, table, ideal)
        out[q, 0] = value
        out[q, 1] = value + f
        out[q, 2] = sum_pos / p - sum_neg / m
        t = 0
        for k in range(n):
            if is_pos[q, k]:
                if gradient:
                    coef[q, k] -= 1.0 / p
            else:
                rank[q, k] = neg_rank[t]
                t += 1
                if gradient:
                    coef[q, k] += 1.0 / m
"""

_kernels = {}


def _kernel(method, loss_obj):
    """The batch kernel of one method and loss, compiled once per process: generated with the
    solver, the loss's increment and its value functions as globals (as :func:`qs._numba.bind`
    does), so numba calls them directly inside the parallel loop."""
    key = (method, loss_obj.name)
    if key not in _kernels:
        params, value = _LOSS_KERNELS[loss_obj.name]
        namespace = {"np": np, "numba": numba, "solve": _SOLVERS[method], "inc": loss_obj.kernel,
                     "params": params, "loss_value": value}
        exec(_BATCH_SOURCE, namespace)
        _kernels[key] = jit_generic(namespace["batch"])
    return _kernels[key]


@jit
def _zero_one_batch(scores, is_pos, n_pos, gradient, rank, coef, out):
    n = scores.shape[1]
    h = 0.5 / n
    for q in range(scores.shape[0]):
        if n_pos[q] == 0 or n_pos[q] == n:
            coef[q, :] = 0.0
            continue
        _, _, value, dot, truth = zero_one_lai(scores[q], is_pos[q], coef[q])
        out[q, 0] = value
        out[q, 1] = value + dot
        out[q, 2] = truth
        if gradient:
            for k in range(n):
                coef[q, k] -= h if is_pos[q, k] else -h


def _brute_rows(scores, is_pos, n_pos, loss, gradient, rank, coef, out):
    """:func:`lai` with method "brute", row by row."""
    n = scores.shape[1]
    coef[:] = 0.0
    for q in np.flatnonzero((n_pos > 0) & (n_pos < n)):
        pos = is_pos[q].astype(bool)
        res = lai(scores[q], pos, loss, "brute")
        rank[q, ~pos] = res.neg_rank
        coef[q] = res.coef
        if gradient:
            coef[q] -= np.where(pos, 1.0 / n_pos[q], -1.0 / (n - n_pos[q]))
        out[q] = res.loss, res.objective, res.ground_truth_F

