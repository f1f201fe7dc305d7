"""The compiled loop over the rows of `qs.inference.batch.lai_batch` (`_batch`).

The kernel takes the method and the loss as integer codes (`METHOD_CODES`), so that it
is compiled once for every method and both built-in losses and cached on disk like the
other kernels (`qs._numba.jit`): a new process loads it instead of compiling. A named
method solves each query with the per-query kernel of `qs.inference.lai`, so
objectives and ranks are those of ``lai`` row by row. ``"auto"`` chooses as ``lai`` does
(`qs.inference.auto.sorts`): a query it leaves unsorted goes to ``bucket``, one it
sorts to the kernel of ``lai``'s default, or, when small, to the small-query route
(`qs.inference._batch_small`).

Each query is solved in work arrays that the thread keeps from call to call (a float32 row
widened to float64, the coefficients, the ranks, the per-query kernels' work;
`_work_arrays`), then written out in one pass that subtracts ``coef(R*)`` for the
gradient and stores the coefficients in the dtype asked for (`_finish_row`). A row
that ``bucket`` solves is read in the scores' dtype and its output row written as it is
solved, the gradient's shift included (`_bucket_row`): a float32 (Q, n) score matrix
is neither copied to float64 nor its gradient made in float64. The finiteness of the scores
is checked row by row by the pass that first reads them. A row may come in two parts, a lead
and the rest, joined in one work row: a memory bank's scores within the batch and against
the bank, with no (Q, k + n) copy. The loss values come from `qs.losses.loss_value`
and NDCG's increments from `qs.losses.ndcg_increments_into`, as ``lai``'s.
"""

import threading

import numpy as np
from numba import types
from numba.extending import overload

from qs._numba import jit, jit_inline
from qs.inference._batch_small import (
    BUCKETS_PER_NEGATIVE,
    SMALL_ROW_MAX,
    _small_row,
    ideal_of,
    params_into,
)
from qs.inference._input import OK, scan_and_gather
from qs.inference.auto import AUTO as ROUTE_AUTO
from qs.inference.auto import BUCKET_SORT as ROUTE_BUCKET_SORT
from qs.inference.auto import QS as ROUTE_QS
from qs.inference.auto import gathered_lai as _gathered_lai
from qs.inference.auto import sorts, work_floats, work_ints
from qs.inference.bucket import _bucket, n_buckets_for
from qs.inference.bucket_sort import histogram_size
from qs.inference.qs import sort_dc as _sort_dc
from qs.inference.scan import scan_sorted as _scan_sorted
from qs.inference.search import search_sorted as _search_sorted
from qs.inference.zero_one import zero_one_lai
from qs.losses import loss_value

#: the kernel's code of each method ("yue" and "chakrabarti" share the scan)
METHOD_CODES = {
    "auto": 0,
    "bucket_sort": 1,
    "bucket": 2,
    "qs": 3,
    "sort_dc": 4,
    "yue": 5,
    "chakrabarti": 5,
    "search": 6,
    "zero_one": 7,
}
AUTO, BUCKET_SORT, BUCKET, QS, SORT_DC, SCAN, SEARCH, ZERO_ONE = range(8)


#: rows of at most this many samples are solved in work arrays that each thread keeps from
#: one call to the next (`_work_arrays`): about 100 bytes of address space per sample,
#: of which only what the rows use is touched. Calls that allocated them afresh paid for
#: their new pages: on 4 rows of 10^5 samples, 10% positives (rows the default sorts), 15.7
#: ms per call against 11.2 ms with the arrays held (4 calls of lai: 12.7 ms; CPU time)
HELD_MAX = 1 << 20
_held = threading.local()
_NONE_HELD = (
    np.empty(0),
    np.empty(0, dtype=np.uint8),
    np.empty(0),
    np.empty(0, dtype=np.int32),
    np.empty(0),
    np.empty(0),
    np.empty(0, dtype=np.int64),
    np.empty(0, dtype=np.uint16),
)


def _work_arrays(n):
    """The kernel's work arrays for rows of ``n`` samples: (row, labels, coefficients,
    ranks, increments, floats, ints, buckets) as `_batch` takes them, this thread's (grown
    to ``n``, never shrunk; floats and ints sized for any share of positives,
    `qs.inference.auto.work_floats` and ``work_ints``) for ``n`` up to
    `HELD_MAX`. Longer rows get empty arrays, and the kernel allocates those it uses
    (its allocations take 4 KiB pages, numpy's of 4 MiB and more huge pages where the
    system allows: at 4 rows of 10^6 samples, 0.1% positives, 2 threads, the kernel
    allocating per block of rows took 37 ms of CPU time, the held arrays 29, 4 calls of
    lai 28)."""
    if n > HELD_MAX:
        return _NONE_HELD
    arrays = getattr(_held, "arrays", None)
    if arrays is None or arrays[0].size < n:
        arrays = _held.arrays = (
            np.empty(n),
            np.empty(n, dtype=np.uint8),
            np.empty(n),
            np.empty(n, dtype=np.int32),
            np.empty(n + 1),
            np.empty(work_floats(0, n)),
            np.empty(work_ints(0, n) + histogram_size(n, 0), dtype=np.int64),
            np.empty(n, dtype=np.uint16),
        )
    return arrays


def _float64_row(row, buf):
    """``row`` as float64: itself when it is, else widened into ``buf`` (of its size)."""
    if row.dtype == np.float64:
        return row
    buf[:] = row
    return buf


@overload(_float64_row, inline="always")
def _float64_row_numba(row, buf):
    if row.dtype == types.float64:
        return lambda row, buf: row

    def widened(row, buf):
        for k in range(row.size):
            buf[k] = row[k]
        return buf

    return widened


def _solved_in(coef_row, work):
    """Where a row's coefficients are solved: the output row itself when it is float64 (the
    pass that subtracts ``coef(R*)`` then writes over them in place), else the float64 work
    row."""
    return coef_row if coef_row.dtype == np.float64 else work


@overload(_solved_in, inline="always")
def _solved_in_numba(coef_row, work):
    if coef_row.dtype == types.float64:
        return lambda coef_row, work: coef_row
    return lambda coef_row, work: work


def _is_float64(arr):
    """Whether ``arr`` holds float64 (a constant of the compiled kernel)."""
    return arr.dtype == np.float64


@overload(_is_float64, inline="always")
def _is_float64_numba(arr):
    is_float64 = arr.dtype == types.float64
    return lambda arr: is_float64


@jit
def _joined_row(lead, row, buf):
    """The row ``[lead | row]`` (scores or labels): ``row`` itself when ``lead`` is empty,
    else copied into ``buf``."""
    if lead.size == 0:
        return row
    return _joined(lead, row, buf)


@jit
def _joined(lead, row, buf):
    """``[lead | row]`` written into ``buf`` (in its dtype); returns ``buf``. The row is
    copied into a view of ``buf`` at offset 0: written as ``buf[k + t]``, the loop did not
    vectorise (8.0 against 1.9 ms for 64 rows of 10^5 float32 scores and their labels)."""
    k = lead.size
    for t in range(k):
        buf[t] = lead[t]
    rest = buf[k : k + row.size]
    for t in range(row.size):
        rest[t] = row[t]
    return buf


@jit
def _not_finite_at(row):
    """Index of the first non-finite score of ``row``, -1 if none."""
    finite = True
    for k in range(row.size):  # no branch: vectorised
        finite &= np.isfinite(row[k])
    if not finite:
        for k in range(row.size):
            if not np.isfinite(row[k]):
                return k
    return -1


@jit
def _truth_coef(zero_one, gradient, n, p):
    """``coef(R*)`` at a positive and at a negative, which the gradient subtracts (zeros
    without it): ``1/P`` and ``-1/N``; ``+-1/(2n)`` for the 0-1 loss."""
    if not gradient:
        return 0.0, 0.0
    if zero_one:
        return 0.5 / n, -0.5 / n
    return 1.0 / p, -1.0 / (n - p)


@jit
def _finish_row(is_pos, truth_pos, truth_neg, ranked, compact, neg_rank, coef64, rank, coef):
    """Write a solved row: ``coef = coef64 - coef(R*)`` (``truth_pos`` at the positives,
    ``truth_neg`` at the negatives; in ``coef``'s dtype; ``coef64`` may be ``coef`` itself,
    each entry read before it is written), and, unless ``rank`` is empty, the
    negatives' ranks (``neg_rank``: in the negatives' order if ``compact``, else at their
    input places; zeros if not ``ranked``) with 0 at the positives."""
    n = is_pos.size
    if ranked and compact and rank.size:  # one pass: the ranks and coefficients together
        t = 0
        for k in range(n):  # neg_rank holds at least n values: t < n where it is read
            pos = is_pos[k] != 0
            coef[k] = coef64[k] - (truth_pos if pos else truth_neg)
            rank[k] = 0 if pos else neg_rank[t]
            t += not pos
        return
    for k in range(n):  # no branch: vectorised
        coef[k] = coef64[k] - (truth_pos if is_pos[k] else truth_neg)
    if rank.size == 0:
        return
    if not ranked:
        rank[:] = 0
    else:
        for k in range(n):
            rank[k] = 0 if is_pos[k] else neg_rank[k]


@jit
def _batch(
    method,
    inc,
    scores,
    is_pos,
    lead,
    lead_pos,
    table,
    ideal,
    gradient,
    rank,
    coef,
    out,
    valid,
    row,
    y_row,
    coef64,
    neg_rank,
    params,
    floats,
    ints,
    buckets,
):
    """Every row ``[lead[q] | scores[q]]`` (labels ``[lead_pos[q] | is_pos[q]]``; ``lead``
    may have no columns) by the method of code ``method``, the loss of code ``inc``
    (`qs.losses.AP_CODE` or ``NDCG_CODE``; unused for the 0-1 loss); ``rank`` has no
    columns when the ranks are not wanted. Returns the (query, sample) of the first
    non-finite score, (-1, -1) if none; the outputs are then not all filled.

    Each row is solved in work arrays held for the whole call (the row made of the lead and
    the scores, in their dtype, then widened to float64 for the routes other than
    ``bucket``; the coefficients unless the output is float64, the ranks, the per-query
    kernels' work), then written out by one pass (`_finish_row`; none when there is
    nothing to subtract, convert or scatter, and none for the rows ``bucket`` solves, which
    it writes out itself, `_bucket_row`): no allocation per row, and no pass over the
    whole batch before the rows are solved. The
    work arrays ``row`` .. ``buckets`` (`_work_arrays`) are at least as long as a row
    (``params`` one more), or empty and allocated here; ``floats`` and ``ints`` are replaced
    when a row needs more."""
    n_rows = scores.shape[0]
    n = lead.shape[1] + scores.shape[1]
    joined = np.empty(n if lead.shape[1] else 0, dtype=scores.dtype)
    if row.size < n:  # none held for rows this long
        row, y_row, coef64 = np.empty(n), np.empty(n, dtype=np.uint8), np.empty(n)
        neg_rank, params = np.empty(n, dtype=np.int32), np.empty(n + 1)
        buckets = np.empty(n, dtype=np.uint16)
    row, y_row, coef64 = row[:n], y_row[:n], coef64[:n]
    neg_rank, params = neg_rank[:n], params[: n + 1]
    work = np.empty((6, 0))
    iwork = np.empty((6, 0), dtype=np.int64)
    count = np.empty(0, dtype=np.int64)
    for q in range(n_rows):
        given = _joined_row(lead[q], scores[q], joined)  # in the scores' dtype
        y = _joined_row(lead_pos[q], is_pos[q], y_row)
        p = 0
        for k in range(n):
            p += y[k]
        m = n - p
        valid[q] = p > 0 and m > 0
        if not valid[q]:
            bad = _not_finite_at(given)
            if bad >= 0:
                return q, bad
            coef[q, :] = 0.0
            rank[q, :] = 0
            out[q, :] = 0.0
            continue
        if method == BUCKET or (method == AUTO and not sorts(m, p)):
            # read in the scores' dtype; the output row written as it is solved, the
            # gradient's shift included
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
                coef[q],
                truth_pos,
                truth_neg,
                buckets,
                out[q],
            )
            if err != OK:
                return q, where
            if rank.shape[1]:
                _ranks_into(y, neg_rank, rank[q])
            continue
        s = _float64_row(given, row)
        zero_one = method == ZERO_ONE
        compact = True
        solved = _solved_in(coef[q], coef64)
        if zero_one:
            err, where, value, term, truth = zero_one_lai(s, y, solved)
            _write_out(out[q], value, term, truth)
        elif method == AUTO and m < SMALL_ROW_MAX and sorts(m, p):
            err, where = OK, _not_finite_at(s)
            if where < 0:
                if work.shape[1] < n + 2:
                    work = np.empty((6, n + 2))
                    iwork = np.empty((6, n + 2), dtype=np.int64)
                    count = np.empty(BUCKETS_PER_NEGATIVE * n + 2, dtype=np.int64)
                _small_row(inc, s, y, p, table, ideal, work, iwork, count, neg_rank, solved, out[q])
                compact = False
        else:
            if method == AUTO or method == BUCKET_SORT or method == QS:
                if floats.size < work_floats(m, p):
                    floats = np.empty(work_floats(m, p))
                if ints.size < work_ints(m, p):
                    ints = np.empty(work_ints(m, p), dtype=np.int64)
            err, where = _solver_row(
                method, inc, s, y, p, table, ideal, params, floats, ints, neg_rank, solved, out[q]
            )
        if err != OK or where >= 0:
            return q, where
        if gradient or rank.shape[1] or not _is_float64(coef):
            truth_pos, truth_neg = _truth_coef(zero_one, gradient, n, p)
            _finish_row(
                y, truth_pos, truth_neg, not zero_one, compact, neg_rank, solved, rank[q], coef[q]
            )
    return -1, -1


@jit_inline
def _write_out(out, value, term, truth):
    """``out`` (loss, objective, ground-truth F, hinge) from the loss ``value``, the hinge's
    score term ``F(R_bar) - F(R*)`` and ``F(R*)``."""
    hinge = value + term
    out[0], out[1], out[2], out[3] = value, hinge + truth, truth, hinge


@jit
def _bucket_row(
    inc, scores, is_pos, p, table, ideal, params, neg_rank, coef, shift_pos, shift_neg, buckets, out
):
    """One query by ``bucket`` (as bucket_lai) into ``neg_rank`` (the negatives' order) and
    ``coef`` (the output row, of its dtype: coefficients less ``shift_pos`` / ``shift_neg``
    at the positives / negatives). Returns (error, where) of the kernel."""
    m = scores.size - p
    err, where, sum_pos, sum_neg, n_above, f = _bucket(
        inc,
        params_into(inc, table, ideal, p, params),
        scores,
        is_pos,
        p,
        n_buckets_for(p, m),
        neg_rank[:m],
        coef,
        shift_pos,
        shift_neg,
        buckets,
    )
    if err != OK:
        return err, where
    value = loss_value(inc, n_above, ideal_of(inc, ideal, p))
    _write_out(out, value, f, sum_pos / p - sum_neg / m)
    return OK, -1


@jit
def _ranks_into(is_pos, neg_rank, rank):
    """``rank``: 0 at the positives, the negatives' ranks (``neg_rank``, in their order) at
    their places."""
    t = 0
    for k in range(is_pos.size):
        pos = is_pos[k] != 0
        rank[k] = 0 if pos else neg_rank[t]
        t += not pos


@jit
def _solver_row(
    method, inc, scores, is_pos, p, table, ideal, params, floats, ints, neg_rank, coef, out
):
    """One query by the per-query kernel of ``lai`` with the method of code ``method``, into
    ``neg_rank`` (the negatives' order) and ``coef``; ``floats`` and ``ints`` are
    `qs.inference.auto._gathered_lai`'s work arrays. Returns (error, where) of the
    kernel."""
    n = scores.size
    m = n - p
    params = params_into(inc, table, ideal, p, params)
    ranks = neg_rank[:m]
    if method == BUCKET_SORT or method == QS or (method == AUTO and sorts(m, p)):
        # as bucket_sort_lai, qs_lai, and auto_lai's sorting branch
        route = ROUTE_QS if method == QS else ROUTE_AUTO if method == AUTO else ROUTE_BUCKET_SORT
        err, where, sum_pos, sum_neg, n_above, f = _gathered_lai(
            inc, params, route, scores, is_pos, p, ranks, coef, floats, ints
        )
    else:  # the methods on np.sort's sorted negatives, as run_sorted
        v = np.empty(m)
        err, where, sum_pos, sum_neg, pos_sorted, pos_index, ref = scan_and_gather(
            scores, is_pos, p, v
        )
        if err != OK:
            return err, where
        v = np.sort(v)[::-1].copy()
        rk = np.empty(m, dtype=np.int64)
        if method == SORT_DC:
            err, where, sum_pos, sum_neg, n_above, f = _sort_dc(
                inc,
                params,
                v,
                rk,
                scores,
                is_pos,
                pos_sorted,
                pos_index,
                ranks,
                coef,
                sum_pos,
                sum_neg,
                ref,
            )
        elif method == SCAN:
            err, where, sum_pos, sum_neg, n_above, f = _scan_sorted(
                inc,
                params,
                v,
                rk,
                scores,
                is_pos,
                pos_sorted,
                pos_index,
                ranks,
                coef,
                sum_pos,
                sum_neg,
                ref,
            )
        else:
            err, where, sum_pos, sum_neg, n_above, f = _search_sorted(
                inc,
                params,
                v,
                rk,
                scores,
                is_pos,
                pos_sorted,
                pos_index,
                ranks,
                coef,
                sum_pos,
                sum_neg,
                ref,
            )
    if err != OK:
        return err, where
    value = loss_value(inc, n_above, ideal_of(inc, ideal, p))
    _write_out(out, value, f, sum_pos / p - sum_neg / m)
    return OK, -1
