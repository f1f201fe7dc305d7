"""Loss-augmented inference for ragged queries in one call: `lai_queries`.

Learning to rank with queries (SVM-map's setting, LETOR data sets) has many queries of
different lengths, their documents' scores held one query after another in one array, with
``offsets`` marking where each query starts (as a CSR matrix's ``indptr``). ``lai_queries``
solves every query in one compiled loop over those slices: no padding to the longest query,
and one Python call per training pass. Each query is solved by the per-query kernels that
`qs.inference.batch.lai_batch` runs on its rows (`qs.inference._batch_rows`), so
objectives, ranks and coefficients are those of `qs.inference.lai` query by query.

A query without a relevant or without a non-relevant document has no ranking loss: it is
skipped (loss, objective and F zero, coefficients zero, ``valid`` False), not refused, as in
``lai_batch``. Scores must be finite in every query, skipped or not.
"""

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from qs._numba import jit
from qs.inference import lai
from qs.inference._batch_rows import (
    AUTO,
    BUCKET,
    _bucket_row,
    _finish_row,
    _float64_row,
    _is_float64,
    _not_finite_at,
    _ranks_into,
    _solved_in,
    _solver_row,
    _truth_coef,
    _work_arrays,
)
from qs.inference._batch_small import (
    BUCKETS_PER_NEGATIVE,
    INSERTION_MOVES,
    SMALL_ROW_MAX,
    _insertion_pass,
    ideal_of,
    params_into,
)
from qs.inference._hinge import add, score_term
from qs.inference._input import OK, reference
from qs.inference._ranks import opt_ranks_swept
from qs.inference.auto import sorts, work_floats, work_ints
from qs.inference.batch import FLOATS, _codes, _discount
from qs.inference.bucket import _map, thread_count
from qs.inference.bucket_sort import histogram_size
from qs.losses import loss_value
from qs.validation import as_positive_mask

__all__ = ["QueriesResult", "lai_queries"]

#: the losses ``lai_queries`` takes
QUERY_LOSSES = ("ap", "ndcg")
#: calls of at least this many documents (all queries together) run on threads, in blocks of
#: whole queries, as `qs.inference.batch.lai_batch`'s batches do: a training pass over a
#: few thousand queries of about a hundred documents is worth a thread pool's start
THREADED_MIN = 1 << 16
#: the small-query route's work arrays are made for queries of up to this many documents
#: before the call; a longer query (rare in ranking data) grows them in the kernel
SMALL_HELD_MAX = 1 << 16


class QueriesResult(NamedTuple):
    """Results of `lai_queries`: per document (input order) and per query.

    coef : (n_documents,) of the call's ``coef_dtype``: each query's ``coef(R_bar)`` as in
        `qs.inference.LAIResult` at its documents' places, or with ``gradient=True``
        ``coef(R_bar) - coef(R*)``, the gradient of the query's structured hinge with
        respect to its scores; zero in skipped queries.
    rank : int32 (n_documents,): interleaving rank of each non-relevant document within its
        query, 0 at the relevant ones and in skipped queries; None with ``ranks=False``.
    loss, objective, ground_truth_F : float64 (n_queries,), as in ``LAIResult``; zero in
        skipped queries.
    valid : bool (n_queries,): the query has a relevant and a non-relevant document (the
        others are skipped).
    hinge : float64 (n_queries,): the structured hinge ``objective - ground_truth_F`` per
        query (0 if skipped), summed as ``LAIResult.hinge`` is.
    """

    coef: np.ndarray
    rank: np.ndarray | None
    loss: np.ndarray
    objective: np.ndarray
    ground_truth_F: np.ndarray
    valid: np.ndarray
    hinge: np.ndarray


def lai_queries(
    scores: npt.ArrayLike,
    labels: npt.ArrayLike,
    offsets: npt.ArrayLike,
    *,
    loss: str = "ap",
    method: str = "auto",
    gradient: bool = False,
    ranks: bool = True,
    coef_dtype: npt.DTypeLike = np.float64,
) -> QueriesResult:
    """Loss-augmented inference of every query of a ragged set, in one call.

    Query ``q`` is made of the documents ``offsets[q]:offsets[q + 1]``; each is solved as
    `qs.inference.lai` solves it alone (same objective, ranks and coefficients, ties
    broken the same way).

    Parameters
    ----------
    scores : array-like of shape (n_documents,)
        Finite scores, the queries one after another. float64 and float32 arrays are read
        in place (a float32 query is solved as its float64 copy would be); other dtypes are
        converted to float64.
    labels : array-like of shape (n_documents,)
        1 or True for a relevant document, 0, -1 or False for a non-relevant one.
    offsets : array-like of int, shape (n_queries + 1,)
        Where each query starts, then ``n_documents``: non-decreasing from 0. An empty
        query is allowed (and skipped).
    loss : {"ap", "ndcg"}, default "ap"
    method : str, default "auto"
        A method of `qs.inference.METHODS` that supports ``loss``.
    gradient : bool, default False
        If True, ``coef`` holds ``coef(R_bar) - coef(R*)`` instead of ``coef(R_bar)``.
    ranks : bool, default True
        If False, no ranks are written and the result's ``rank`` is None.
    coef_dtype : float64 or float32, default float64
        The dtype ``coef`` is written in.

    Returns
    -------
    QueriesResult
        Per-document ``coef`` and ``rank``, per-query ``loss``, ``objective``,
        ``ground_truth_F`` and ``valid``. A query without a relevant or without a
        non-relevant document is skipped: ``valid`` False, zeros elsewhere.

    Raises
    ------
    ValueError
        On a non-finite score (named by its query and place), labels that are not binary
        or not one per score, offsets that do not cut the documents into queries, an
        unknown loss or method, or a method that does not support the loss.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.inference import lai_queries
    >>> scores = np.array([0.5, 0.1, 0.9, 0.3, 0.2])
    >>> labels = np.array([1, 0, 0, 1, 0])
    >>> res = lai_queries(scores, labels, [0, 2, 5])
    >>> res.valid.tolist()
    [True, True]
    >>> bool(np.all(res.objective >= res.ground_truth_F))
    True
    """
    if not (isinstance(loss, str) and loss in QUERY_LOSSES):
        raise ValueError(f"lai_queries takes loss in {list(QUERY_LOSSES)}; got {loss!r}.")
    code, inc = _codes(loss, method)
    if np.dtype(coef_dtype) not in FLOATS:
        raise ValueError(f"coef_dtype must be float64 or float32; got {coef_dtype!r}.")
    scores = _as_scores(scores)
    is_pos = as_positive_mask(labels, scores.size)
    offsets = _as_offsets(offsets, scores.size)
    n_queries = offsets.size - 1
    rank = np.empty(scores.size if ranks else 0, dtype=np.int32)
    coef = np.empty(scores.size, dtype=coef_dtype)
    out = np.empty((n_queries, 4))  # loss, objective, ground-truth F, hinge
    valid = np.empty(n_queries, dtype=np.bool_)
    if code is None:  # the exhaustive oracle: query by query, for tests on tiny inputs
        _brute_queries(scores, is_pos, offsets, loss, gradient, rank, coef, out, valid)
    else:
        longest = int(np.diff(offsets).max(initial=0))
        table, ideal = _discount(loss, longest)

        def block(a, b):
            qq, kk = _queries(
                code,
                inc,
                scores,
                is_pos,
                offsets[a : b + 1],
                table,
                ideal,
                gradient,
                rank,
                coef,
                out[a:b],
                valid[a:b],
                *_row_work(longest),
            )
            return (a + qq, kk) if kk >= 0 else None

        if scores.size < THREADED_MIN or n_queries == 1:
            where = block(0, n_queries)
        else:
            bounds = np.searchsorted(offsets, np.linspace(0, scores.size, 2 * thread_count() + 1))
            bounds = np.unique(np.clip(bounds, 0, n_queries))
            bounds[0], bounds[-1] = 0, n_queries
            where = min((w for w in _map(block, bounds[:-1], bounds[1:]) if w), default=None)
        if where is not None:
            qq, kk = where
            raise ValueError(
                f"scores must be finite; got {float(scores[offsets[qq] + kk])!r} "
                f"at index {offsets[qq] + kk} (query {qq}, document {kk}). "
                "Remove or impute NaN/inf scores before inference."
            )
    return QueriesResult(
        coef, rank if ranks else None, out[:, 0], out[:, 1], out[:, 2], valid, out[:, 3]
    )


def _as_scores(scores: npt.ArrayLike) -> np.ndarray:
    """Scores as a 1-D C-contiguous array of float64 or float32 (no copy when already so;
    other dtypes are converted to float64); finiteness is checked by the kernel."""
    arr = np.asarray(scores)
    if arr.ndim != 1:
        raise ValueError(
            f"scores must be a 1-D array of one score per document; got shape {arr.shape}."
        )
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"scores must be numeric; got dtype {arr.dtype}.")
    dtype = arr.dtype if arr.dtype in FLOATS and arr.dtype.isnative else np.float64
    return np.ascontiguousarray(arr, dtype=dtype)


def _as_offsets(offsets: npt.ArrayLike, n: int) -> np.ndarray:
    """``offsets`` as int64, checked to cut ``n`` documents into queries."""
    arr = np.asarray(offsets)
    if arr.ndim != 1 or arr.size < 2:
        raise ValueError(
            f"offsets must be a 1-D array of n_queries + 1 >= 2 entries; got shape {arr.shape}."
        )
    if arr.dtype.kind not in "iu":
        raise ValueError(f"offsets must be integers; got dtype {arr.dtype}.")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr[0] != 0 or arr[-1] != n:
        raise ValueError(
            f"offsets must start at 0 and end at the number of documents ({n}); "
            f"got {int(arr[0])} and {int(arr[-1])}."
        )
    drops = np.flatnonzero(arr[1:] < arr[:-1])
    if drops.size:
        q = int(drops[0])
        raise ValueError(
            f"offsets must be non-decreasing; got {int(arr[q])} then "
            f"{int(arr[q + 1])} at entries {q} and {q + 1}."
        )
    return arr


def _row_work(longest):
    """The kernel's work arrays for queries of at most ``longest`` documents: those of
    `qs.inference._batch_rows._work_arrays` (held by the thread, or allocated here for
    very long queries, sized for any share of relevant documents) less the labels' row,
    then the small-query route's."""
    row, _, coef64, neg_rank, params, floats, ints, buckets = _work_arrays(longest)
    if row.size < longest:
        row, coef64 = np.empty(longest), np.empty(longest)
        neg_rank, params = np.empty(longest, dtype=np.int32), np.empty(longest + 1)
        floats = np.empty(work_floats(0, longest))
        ints = np.empty(work_ints(0, longest) + histogram_size(longest, 0), dtype=np.int64)
        buckets = np.empty(longest, dtype=np.uint16)
    small = min(longest, SMALL_HELD_MAX)  # longer queries grow them in the kernel
    return (
        row,
        coef64,
        neg_rank,
        params,
        floats,
        ints,
        buckets,
        np.empty((6, small + 2)),
        np.empty((6, small + 2), dtype=np.int64),
        np.empty(BUCKETS_PER_NEGATIVE * small + 2, dtype=np.int64),
    )


@jit
def _queries(
    method,
    inc,
    scores,
    is_pos,
    offsets,
    table,
    ideal,
    gradient,
    rank,
    coef,
    out,
    valid,
    row,
    coef64,
    neg_rank,
    params,
    floats,
    ints,
    buckets,
    work,
    iwork,
    count,
):
    """Every query ``offsets[q]:offsets[q + 1]`` (of ``scores``, ``is_pos``, ``coef`` and,
    unless empty, ``rank``) by the method of code ``method``, the loss of code ``inc``, into
    ``out[q]`` and ``valid[q]``. Returns the (query, document within it) of the first
    non-finite score, (-1, -1) if none; the outputs are then not all filled."""
    for q in range(offsets.size - 1):
        n = offsets[q + 1] - offsets[q]
        if work.shape[1] < n + 2:  # the small-query route's, for a query longer than held
            work, iwork = np.empty((6, n + 2)), np.empty((6, n + 2), dtype=np.int64)
            count = np.empty(BUCKETS_PER_NEGATIVE * n + 2, dtype=np.int64)
        where = _query(
            method,
            inc,
            scores[offsets[q] : offsets[q + 1]],
            is_pos[offsets[q] : offsets[q + 1]],
            table,
            ideal,
            gradient,
            rank[offsets[q] : offsets[q + 1]] if rank.size else rank,
            coef[offsets[q] : offsets[q + 1]],
            out[q],
            valid[q : q + 1],
            row,
            coef64,
            neg_rank,
            params,
            floats,
            ints,
            buckets,
            work,
            iwork,
            count,
        )
        if where >= 0:
            return q, where
    return -1, -1


@jit
def _query(
    method,
    inc,
    given,
    y,
    table,
    ideal,
    gradient,
    rank,
    coef,
    out,
    valid,
    row,
    coef64,
    neg_rank,
    params,
    floats,
    ints,
    buckets,
    work,
    iwork,
    count,
):
    """One query (scores ``given``, labels ``y``) into its ``coef``, ``rank`` (empty: none
    written), ``out`` (loss, objective, F, hinge) and ``valid[0]``, routed as
    `qs.inference._batch_rows._batch` routes a row; the work arrays are at least as
    long as the query (``params`` one more; ``work``, ``iwork`` and ``count`` for the
    small-query route). Returns the place of the first non-finite score, -1 if none."""
    n = given.size
    p = 0
    for k in range(n):
        p += y[k]
    m = n - p
    valid[0] = p > 0 and m > 0
    if not valid[0]:
        coef[:] = 0.0
        rank[:] = 0
        out[:] = 0.0
        return _not_finite_at(given)
    table = table[: n + 1]  # D(1 .. n + 1), as lai's table for n samples
    if method == BUCKET or (method == AUTO and not sorts(m, p)):
        truth_pos, truth_neg = _truth_coef(False, gradient, n, p)
        err, where = _bucket_row(
            inc,
            given,
            y,
            p,
            table,
            ideal,
            params,
            neg_rank,
            coef,
            truth_pos,
            truth_neg,
            buckets,
            out,
        )
        if err != OK:
            return where
        if rank.size:
            _ranks_into(y, neg_rank, rank)
        return -1
    s = _float64_row(given, row[:n])
    truth_pos, truth_neg = _truth_coef(False, gradient, n, p)
    if method == AUTO and m < SMALL_ROW_MAX:
        where = _not_finite_at(s)
        if where < 0:
            _small_query(
                inc,
                s,
                y,
                p,
                table,
                ideal,
                truth_pos,
                truth_neg,
                work,
                iwork,
                count,
                neg_rank,
                rank,
                coef,
                out,
            )
        return where
    solved = _solved_in(coef, coef64[:n])
    err, where = _solver_row(
        method, inc, s, y, p, table, ideal, params, floats, ints, neg_rank, solved, out
    )
    if err != OK or where >= 0:
        return where
    if gradient or rank.size or not _is_float64(coef):
        _finish_row(y, truth_pos, truth_neg, True, True, neg_rank, solved, rank, coef)
    return -1


def _brute_queries(scores, is_pos, offsets, loss, gradient, rank, coef, out, valid):
    """`lai` with method "brute", query by query."""
    rank[:] = 0
    coef[:] = 0.0
    out[:] = 0.0
    for q in range(offsets.size - 1):
        a, b = offsets[q], offsets[q + 1]
        s, pos = scores[a:b].astype(np.float64), is_pos[a:b].astype(bool)
        n_pos = int(pos.sum())
        valid[q] = 0 < n_pos < b - a
        if not valid[q]:
            bad = np.flatnonzero(~np.isfinite(s))
            if bad.size:
                raise ValueError(
                    f"scores must be finite; got {float(s[bad[0]])!r} at index "
                    f"{a + bad[0]} (query {q}, document {bad[0]}). Remove or "
                    "impute NaN/inf scores before inference."
                )
            continue
        res = lai(s, pos, loss, "brute")
        if rank.size:
            rank[a:b][~pos] = res.neg_rank
        c = res.coef
        if gradient:
            c = c - np.where(pos, 1.0 / n_pos, -1.0 / (b - a - n_pos))
        coef[a:b] = c
        out[q] = res.loss, res.objective, res.ground_truth_F, res.hinge


@jit
def _bucket_order(v, idx, size, low, high, bucket, count, sorted_v, sorted_idx):
    """``v[:size]`` (``idx`` along), whose values lie in ``low..high``, in descending
    order into ``sorted_v`` / ``sorted_idx``, ties in input order: as `_small_row` sorts
    its negatives (`BUCKETS_PER_NEGATIVE` buckets per value over the range, placed by
    bucket in input order, one insertion pass, or a stable merge sort should it move too
    much); ``bucket`` and ``count`` are scratch."""
    top = BUCKETS_PER_NEGATIVE * size - 1
    scale = (top + 1) / (high - low) if high > low else 0.0
    if not np.isfinite(scale):
        scale = 0.0
    for t in range(size):  # no branch: vectorised
        x = (v[t] - low) * scale  # in 0..top+1 but for rounding (NaN if the range overflows)
        bucket[t] = min(np.int64(x) if x >= 1.0 else 0, top)
    count[: top + 1] = 0
    for t in range(size):
        count[bucket[t]] += 1
    placed = 0
    for t in range(top, -1, -1):  # the highest bucket first; count becomes where each starts
        c = count[t]
        count[t] = placed
        placed += c
    for t in range(size):
        at = count[bucket[t]]
        sorted_v[at] = v[t]
        sorted_idx[at] = idx[t]
        count[bucket[t]] = at + 1
    if not _insertion_pass(sorted_v, sorted_idx, size, INSERTION_MOVES * size):
        order = np.argsort(-sorted_v[:size], kind="mergesort")  # stable: ties keep input order
        sorted_v[:size] = sorted_v[:size][order]
        sorted_idx[:size] = sorted_idx[:size][order]


@jit
def _small_query(
    inc,
    scores,
    is_pos,
    p,
    table,
    ideal,
    truth_pos,
    truth_neg,
    work,
    iwork,
    count,
    neg_rank,
    rank,
    coef,
    out,
):
    """One query of few negatives by `qs.inference._batch_small._small_row`'s route, the
    same objective, ranks and coefficients, with two changes for whole passes over
    queries of about as many relevant documents as not: the positives are sorted by
    buckets as the negatives are (`_bucket_order`; ``_small_row`` counts each one's place
    among all, P^2 comparisons), and the output row is written as it is solved:
    ``coef = coef(R_bar) - truth`` (``truth_pos`` / ``truth_neg`` at the positives /
    negatives, in ``coef``'s dtype) and, unless ``rank`` is empty, the ranks with 0 at the
    positives. ``neg_rank`` (n) is scratch; the work arrays as ``_small_row`` takes them."""
    n = scores.size
    m = n - p
    v, sorted_v, pos_values, spos, params, pos_sorted = (
        work[0],
        work[1],
        work[2],
        work[3],
        work[4],
        work[5],
    )
    idx, sorted_idx, pos_index, rk, pos_order, bucket = (
        iwork[0],
        iwork[1],
        iwork[2],
        iwork[3],
        iwork[4],
        iwork[5],
    )
    ref = reference(scores)
    sum_pos = 0.0
    sum_neg = 0.0
    low = np.inf
    high = -np.inf
    pos_low = np.inf
    pos_high = -np.inf
    a = 0
    b = 0
    for k in range(n):  # both places written, one of them kept: no branch
        s = scores[k]
        pos = is_pos[k] != 0
        pos_values[a] = s
        pos_index[a] = k
        v[b] = s
        idx[b] = k
        a += pos
        b += not pos
        d = s - ref
        sum_pos += d if pos else 0.0  # adding 0.0 changes no sum: F as lai sums it
        sum_neg += 0.0 if pos else d
        low = min(low, np.inf if pos else s)
        high = max(high, -np.inf if pos else s)
        pos_low = min(pos_low, s if pos else np.inf)
        pos_high = max(pos_high, s if pos else -np.inf)
    _bucket_order(v, idx, m, low, high, bucket, count, sorted_v, sorted_idx)
    # the positives' sort takes the negatives' buckets as scratch: they are placed
    _bucket_order(pos_values, pos_index, p, pos_low, pos_high, bucket, count, pos_sorted, pos_order)
    c2 = 2.0 / (p * m)
    spos[0] = ref
    for i in range(p):
        spos[i + 1] = c2 * (pos_sorted[i] - ref)
    opt_ranks_swept(sorted_v[:m], rk, inc, params_into(inc, table, ideal, p, params), p, c2, spos)
    # as rank_pass and finish: ranks and coefficients of the negatives and the negatives per
    # rank; F summed over the negatives in input order, then over the positives by score
    inv = 1.0 / (p * m)
    count[: p + 2] = 0
    for t in range(m):
        k = sorted_idx[t]
        r = rk[t]
        neg_rank[k] = r
        coef[k] = (p + 2 - 2 * r) * inv - truth_neg
        count[r] = t + 1  # ranks ascend: the negatives of rank at most r (a store, no count)
    total, comp = 0.0, 0.0  # the hinge's score term (qs.inference._hinge)
    for t in range(m):  # the negatives as gathered: in input order
        total, comp = add(total, comp, (p + 1 - neg_rank[idx[t]]) * inv * (v[t] - ref))
    if rank.size:
        for t in range(m):
            rank[idx[t]] = neg_rank[idx[t]]
        for k in range(p):
            rank[pos_index[k]] = 0
    n_above = bucket[:p]  # the buckets are read: the row is free
    above = 0
    for k in range(p):
        above = max(above, count[k + 1])
        n_above[k] = above
        coef[pos_order[k]] = (m - 2.0 * above) * inv - truth_pos
        total, comp = add(total, comp, -above * inv * (pos_sorted[k] - ref))
    value = loss_value(inc, n_above, ideal_of(inc, ideal, p))
    truth = sum_pos / p - sum_neg / m
    hinge = value + score_term(total, comp)
    out[0], out[1], out[2], out[3] = value, hinge + truth, truth, hinge
