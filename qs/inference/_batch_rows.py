"""The compiled loop over the rows of `qs.inference.batch.lai_batch` (`batch_rows`), and the
solver of one row (`solve_row`) that it shares with `qs.inference.queries.lai_queries` and
`qs.ssvm.queries`.

A method is a row of `ROW_METHODS`, a `RowMethod` that says which per-query kernel solves a
row and on which rows: ``bucket`` (always, or on the rows ``auto`` leaves unsorted,
`qs.inference.auto.sorts`), the small-query route (`qs.inference._batch_small`) below a
number of negatives, or the per-query kernel of ``lai`` (`gathered_lai` with its route, one
of the kernels on ``np.sort``'s sorted negatives, or the 0-1 kernel). The kernel takes the
record as a tuple of integers, so that it is compiled once for every method and the built-in
losses and cached on disk like the other kernels (`qs._numba.jit`): a new process loads it
instead of compiling. Objectives and ranks are those of ``lai`` row by row.

The loss comes as ``inc`` (a built-in loss's code, or a `qs.losses.QSLoss`'s increment
kernel, compiled in each process like ``lai``'s) and a record `RowLoss` of arrays: the
built-in losses' parameters are computed in the kernel (NDCG's table from its discount,
`loss_params`), another loss's are prepared per row by `QSLoss.prepare` before the call
(`row_loss`), and its value, a Python method, is computed after it from the negatives above
each positive the kernel stores (`finish_values`).

Each query is solved in work arrays that the thread keeps from call to call (`work_arrays`),
then written out in one pass that subtracts ``coef(R*)`` for the gradient and stores the
coefficients in the dtype asked for (`finish_row`). A row that ``bucket`` or the small-query
route solves is read in the scores' dtype and its output row written as it is solved, the
gradient's shift included (`_bucket_row`, `small_row`): a float32 (Q, n) score matrix is
neither copied to float64 nor its gradient made in float64. The finiteness of the scores
is checked row by row by the pass that first reads them. A row may come in two parts, a
lead and the rest, joined in one work row: a memory bank's scores within the batch and
against the bank, with no (Q, k + n) copy.
"""

import functools
import threading
from typing import NamedTuple

import numpy as np
from numba import types
from numba.extending import overload

from qs._numba import BUILTIN_INCREMENTS, jit, jit_inline, unowned
from qs.inference import resolve
from qs.inference._batch_small import BUCKETS_PER_NEGATIVE, SMALL_ROW_MAX, small_row
from qs.inference._input import OK, scan_and_gather
from qs.inference.auto import AUTO as ROUTE_AUTO
from qs.inference.auto import BUCKET_SORT as ROUTE_BUCKET_SORT
from qs.inference.auto import QS as ROUTE_QS
from qs.inference.auto import gathered_lai, sorts, work_floats, work_ints
from qs.inference.bucket import bucket_ranks, n_buckets_for
from qs.inference.bucket_sort import histogram_size
from qs.inference.scan import scan_sorted
from qs.inference.search import search_sorted
from qs.inference.sort_dc import sort_dc
from qs.inference.zero_one import zero_one_lai
from qs.losses import AP_CODE, LOSSES, loss_value, ndcg_increments_into

#: when ``bucket`` solves a row (`RowMethod.bucket`): never, always, or where the default
#: would not sort (`qs.inference.auto.sorts`)
NEVER, ALWAYS, UNSORTED = range(3)
#: the per-query kernel of the rows ``bucket`` and the small-query route leave
#: (`RowMethod.kernel`): `gathered_lai` (with `RowMethod.route`), a kernel on ``np.sort``'s
#: sorted negatives (`sorted_kernel`), or the 0-1 loss's
GATHERED, SORT_DC, SCAN, SEARCH, ZERO_ONE = range(5)


class RowMethod(NamedTuple):
    """How `solve_row` solves a row: the kernel's record of a method.

    bucket : `NEVER`, `ALWAYS` or `UNSORTED`: the rows ``bucket`` solves.
    small : the rows of fewer negatives than this that the default sorts go to the
        small-query route (`qs.inference._batch_small.small_row`); 0 for none.
    kernel : the per-query kernel of the other rows (`GATHERED`, `SORT_DC`, `SCAN`,
        `SEARCH` or `ZERO_ONE`).
    route : `gathered_lai`'s route (`qs.inference.auto.AUTO`, ``QS`` or ``BUCKET_SORT``)
        when ``kernel`` is `GATHERED`.
    """

    bucket: int
    small: int
    kernel: int
    route: int


#: every method of `qs.inference.METHODS` but "brute" (the oracle, run by ``lai``), as
#: `solve_row` runs it; a method for ``lai_batch`` is a row here
ROW_METHODS = {
    "auto": RowMethod(UNSORTED, SMALL_ROW_MAX, GATHERED, ROUTE_AUTO),
    "bucket": RowMethod(ALWAYS, 0, GATHERED, ROUTE_AUTO),
    "bucket_sort": RowMethod(NEVER, 0, GATHERED, ROUTE_BUCKET_SORT),
    "qs": RowMethod(NEVER, 0, GATHERED, ROUTE_QS),
    "sort_dc": RowMethod(NEVER, 0, SORT_DC, 0),
    "yue": RowMethod(NEVER, 0, SCAN, 0),
    "chakrabarti": RowMethod(NEVER, 0, SCAN, 0),
    "search": RowMethod(NEVER, 0, SEARCH, 0),
    "zero_one": RowMethod(NEVER, 0, ZERO_ONE, 0),
}


@functools.lru_cache(maxsize=64)
def row_method(loss, method):
    """(the kernel's method record, or None for "brute"; the loss's ``inc``: a built-in
    loss's code, -1 for the 0-1 loss, else the loss's increment kernel; the loss object,
    None for the 0-1 loss) of ``loss`` and ``method``, resolved as `qs.inference.lai`
    resolves them, once per (loss, method): resolving costs a share of a small batch's
    call. The record is a plain tuple: numba reads a named tuple's type at every call."""
    loss_obj, method = resolve(loss, method)
    inc = -1 if loss_obj is None else BUILTIN_INCREMENTS.get(loss_obj.kernel, loss_obj.kernel)
    record = None if method == "brute" else tuple(ROW_METHODS[method])
    return record, inc, loss_obj


class RowLoss(NamedTuple):
    """What the kernel reads of the loss beside its increment (passed as a plain tuple).

    table, ideal : a built-in loss's: NDCG's discount ``D(1..n+1)`` and its prefix sums
        ``C(P)`` (index P-1), empty for AP and the 0-1 loss (`loss_tables`).
    params, starts, stops : another loss's: query ``q``'s increment parameters are
        ``params[starts[q]:stops[q]]`` (`QSLoss.prepare`); empty for the built-in losses.
    n_above : another loss's: row ``q`` gets the negatives above each positive of query
        ``q`` (its first P entries), of which `finish_values` computes the loss; (0, 0)
        for the built-in losses, whose values the kernel computes.
    """

    table: np.ndarray
    ideal: np.ndarray
    params: np.ndarray
    starts: np.ndarray
    stops: np.ndarray
    n_above: np.ndarray


_NO_INDEX = np.empty(0, dtype=np.int64)
_NO_N_ABOVE = np.empty((0, 0), dtype=np.int64)


@functools.lru_cache(maxsize=4)
def loss_tables(loss, n):
    """NDCG's discount ``D(1..n+1)`` and its prefix sums ``C(P) = sum_{k<=P} D(k)`` (index
    P-1), shared by all queries of at most n samples; empty for the other losses."""
    if loss != "ndcg":
        return np.zeros(0), np.zeros(0)
    d = LOSSES["ndcg"].discount(np.arange(1, n + 2))
    return d, np.cumsum(d)


#: the built-in losses' objects (by identity), whose parameters and values the kernel computes
_BUILT_IN = frozenset(id(loss) for loss in LOSSES.values())


@functools.lru_cache(maxsize=8)
def _built_in_rows(name, n):
    """The `RowLoss` tuple of the built-in loss ``name`` ("" for the 0-1 loss)."""
    table, ideal = loss_tables(name, n)
    return (table, ideal, table[:0], _NO_INDEX, _NO_INDEX, _NO_N_ABOVE)


def row_loss(loss_obj, n, sizes):
    """The `RowLoss` tuple of ``loss_obj`` (None for the 0-1 loss) for queries of at most
    ``n`` samples; ``sizes`` (a callable) gives the (Q, 2) int64 array of each query's
    (positives, samples), asked only for a loss other than the built-in ``LOSSES``' (a new
    instance of a built-in class included), whose parameters and values come from its own
    methods."""
    if loss_obj is None or id(loss_obj) in _BUILT_IN:
        return _built_in_rows("" if loss_obj is None else loss_obj.name, n)
    sizes = sizes()
    prepared: dict[tuple[int, int], tuple[int, int]] = {}
    chunks = []
    at = 0
    starts = np.zeros(len(sizes), dtype=np.int64)
    stops = np.zeros(len(sizes), dtype=np.int64)
    for q, (p, nq) in enumerate(sizes.tolist()):
        if not 0 < p < nq:
            continue
        if (p, nq) not in prepared:
            params = np.ascontiguousarray(loss_obj.prepare(p, nq - p), dtype=np.float64)
            prepared[p, nq] = (at, at + params.size)
            chunks.append(params)
            at += params.size
        starts[q], stops[q] = prepared[p, nq]
    params = np.concatenate(chunks) if chunks else np.zeros(0)
    return (params[:0], params[:0], params, starts, stops, np.zeros((len(sizes), n), np.int64))


def finish_values(loss_obj, loss, sizes, out, valid):
    """For a loss the kernel does not evaluate (``loss``'s ``n_above`` not empty): each
    solved query's loss from the negatives above its positives (``QSLoss.value``), written
    into ``out`` (loss, objective, F, hinge) beside the score terms the kernel wrote, as
    `qs.inference.lai` adds them; ``sizes`` as `row_loss` took them."""
    n_above = loss[5]
    if n_above.size == 0:
        return
    for q in np.flatnonzero(valid):
        value = loss_obj.value(n_above[q, : sizes[q, 0]])
        hinge = value + out[q, 3]  # the kernel's hinge: the score term alone
        out[q, 0], out[q, 1], out[q, 3] = value, hinge + out[q, 2], hinge


def loss_params(inc, loss, q, n, p, buf):
    """Query ``q``'s increment parameters (`qs.losses.QSLoss.prepare`), for ``n`` samples
    of which ``p`` positives: what `row_loss` prepared for a loss other than the built-in
    ones, else none for AP and NDCG's table written in ``buf`` (n + 1 long)."""
    if loss[3].size:
        return loss[2][loss[3][q] : loss[4][q]]
    if inc == AP_CODE:
        return buf[:0]
    return ndcg_increments_into(loss[0][: n + 1], loss[1][p - 1], buf)


@overload(loss_params)
def _loss_params_numba(inc, loss, q, n, p, buf):
    if isinstance(inc, types.Integer):

        def by_code(inc, loss, q, n, p, buf):
            if loss[3].size:
                return loss[2][loss[3][q] : loss[4][q]]
            if inc == AP_CODE:
                return buf[:0]
            return ndcg_increments_into(loss[0][: n + 1], loss[1][p - 1], buf)

        return by_code
    return lambda inc, loss, q, n, p, buf: loss[2][loss[3][q] : loss[4][q]]


def row_value(inc, loss, q, n_above):
    """Query ``q``'s loss from the negatives above each positive ``n_above``: a built-in
    loss's value (`qs.losses.loss_value`); for another loss, 0 with ``n_above`` stored for
    `finish_values`."""
    if loss[5].shape[0]:
        loss[5][q, : n_above.size] = n_above
        return 0.0
    return loss_value(inc, n_above, 1.0 if inc == AP_CODE else loss[1][n_above.size - 1])


@overload(row_value)
def _row_value_numba(inc, loss, q, n_above):
    if isinstance(inc, types.Integer):

        def by_code(inc, loss, q, n_above):
            if loss[5].shape[0]:
                loss[5][q, : n_above.size] = n_above
                return 0.0
            return loss_value(inc, n_above, 1.0 if inc == AP_CODE else loss[1][n_above.size - 1])

        return by_code

    def stored(inc, loss, q, n_above):
        loss[5][q, : n_above.size] = n_above
        return 0.0

    return stored


#: rows of at most this many samples are solved in work arrays that each thread keeps from
#: one call to the next (`work_arrays`): about 100 bytes of address space per sample, of
#: which only what the rows use is touched (docs/inference_design.md, "The batch kernels")
HELD_MAX = 1 << 20
#: the small-query route's work arrays are made for rows of up to this many samples; a
#: longer row that takes the route (few negatives, many positives) allocates its own
SMALL_HELD_MAX = 1 << 16
_held = threading.local()
#: the places of the arrays in `work_arrays`' tuple
ROW, LABELS, COEF64, NEG_RANK, PARAMS, FLOATS, INTS, BUCKETS = range(8)
SMALL_FLOATS, SMALL_INTS, SMALL_COUNT = range(8, 11)


def work_arrays(n):
    """The work arrays of `solve_row` for rows of at most ``n`` samples, as a tuple: (row,
    labels, coefficients, ranks, increment parameters, floats, ints, buckets, the
    small-query route's floats, ints and counts). This thread's for ``n`` up to `HELD_MAX`
    (grown to ``n``, never shrunk), new ones above; floats and ints sized for any share of
    positives (`qs.inference.auto.work_floats` and ``work_ints``)."""
    arrays = getattr(_held, "arrays", None) if n <= HELD_MAX else None
    if arrays is None or arrays[0].size < n:
        small = min(n, SMALL_HELD_MAX) + 2
        arrays = (
            np.empty(n),
            np.empty(n, dtype=np.uint8),
            np.empty(n),
            np.empty(n, dtype=np.int32),
            np.empty(n + 1),
            np.empty(work_floats(0, n)),
            np.empty(work_ints(0, n) + histogram_size(n, 0), dtype=np.int64),
            np.empty(n, dtype=np.uint16),
            np.empty((5, small)),
            np.empty((6, small), dtype=np.int64),
            np.empty(BUCKETS_PER_NEGATIVE * small, dtype=np.int64),
        )
        if n <= HELD_MAX:
            _held.arrays = arrays
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
    copied into a view of ``buf`` at offset 0, a loop that vectorises (written as
    ``buf[k + t]``, it did not)."""
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
def truth_coef(zero_one, gradient, n, p):
    """``coef(R*)`` at a positive and at a negative, which the gradient subtracts (zeros
    without it): ``1/P`` and ``-1/N``; ``+-1/(2n)`` for the 0-1 loss."""
    if not gradient:
        return 0.0, 0.0
    if zero_one:
        return 0.5 / n, -0.5 / n
    return 1.0 / p, -1.0 / (n - p)


@jit
def finish_row(is_pos, truth_pos, truth_neg, ranked, neg_rank, coef64, rank, coef):
    """Write a solved row: ``coef = coef64 - coef(R*)`` (``truth_pos`` at the positives,
    ``truth_neg`` at the negatives; in ``coef``'s dtype; ``coef64`` may be ``coef`` itself,
    each entry read before it is written), and, unless ``rank`` is empty, the
    negatives' ranks (``neg_rank``, in the negatives' order; zeros if not ``ranked``) with
    0 at the positives."""
    n = is_pos.size
    if ranked and rank.size:  # one pass: the ranks and coefficients together
        t = 0
        for k in range(n):  # neg_rank holds at least n values: t < n where it is read
            pos = is_pos[k] != 0
            coef[k] = coef64[k] - (truth_pos if pos else truth_neg)
            rank[k] = 0 if pos else neg_rank[t]
            t += not pos
        return
    for k in range(n):  # no branch: vectorised
        coef[k] = coef64[k] - (truth_pos if is_pos[k] else truth_neg)
    rank[:] = 0


@jit_inline
def solve_row(method, inc, loss, q, given, y, gradient, rank, coef, out, work):
    """Query ``q`` (scores ``given``, in their dtype, labels ``y``) by the method record
    ``method`` (`RowMethod`) and the loss ``inc``, ``loss`` (`RowLoss`), into its ``coef``,
    ``rank`` (none written if empty), ``out`` (loss, objective, F, hinge); ``work`` as
    `work_arrays` makes it, for at least ``given.size`` samples. Returns (whether the
    query has a positive and a negative, the place of the first non-finite score or -1);
    a query without both is skipped, its outputs zero. Inlined into its callers, and
    each work array read where it is used: a call, or an unpacking of ``work``, would count
    the references of every work array at each row."""
    bucket, small, kernel, route = method
    neg_rank = work[NEG_RANK]
    n = given.size
    p = 0
    for k in range(n):
        p += y[k]
    m = n - p
    if p == 0 or m == 0:
        coef[:] = 0.0
        rank[:] = 0
        out[:] = 0.0
        return False, _not_finite_at(given)
    if bucket == ALWAYS or (bucket == UNSORTED and not sorts(m, p)):
        # read in the scores' dtype; the output row written as it is solved, the
        # gradient's shift included
        truth_pos, truth_neg = truth_coef(False, gradient, n, p)
        err, where, n_above, term, truth = _bucket_row(
            inc,
            loss_params(inc, loss, q, n, p, work[PARAMS]),
            given,
            y,
            p,
            neg_rank,
            coef,
            truth_pos,
            truth_neg,
            work[BUCKETS],
        )
        if err != OK:
            return True, where
        _write_out(out, row_value(inc, loss, q, n_above), term, truth)
        if rank.size:
            _ranks_into(y, neg_rank, rank)
        return True, -1
    zero_one = kernel == ZERO_ONE
    if m < small and sorts(m, p):  # small is 0 for the 0-1 loss's method
        # read in the scores' dtype; the output row written as it is solved, the
        # gradient's shift included
        where = _not_finite_at(given)
        if where >= 0:
            return True, where
        work_f, work_i, count = work[SMALL_FLOATS], work[SMALL_INTS], work[SMALL_COUNT]
        if work_f.shape[1] < n + 2:  # a long row of few negatives: none held this long
            work_f, work_i = np.empty((5, n + 2)), np.empty((6, n + 2), dtype=np.int64)
            count = np.empty(BUCKETS_PER_NEGATIVE * n + 2, dtype=np.int64)
        params = loss_params(inc, loss, q, n, p, work[PARAMS])
        truth_pos, truth_neg = truth_coef(False, gradient, n, p)
        n_above, term, truth = small_row(
            inc, params, given, y, p, work_f, work_i, count, neg_rank, coef, truth_pos, truth_neg
        )
        _write_out(out, row_value(inc, loss, q, n_above), term, truth)
        if rank.size:
            _input_ranks_into(y, neg_rank, rank)
        return True, -1
    s = _float64_row(given, work[ROW][:n])
    solved = _solved_in(coef, work[COEF64][:n])
    if zero_one:
        err, where, value, term, truth = zero_one_lai(s, y, solved)
        if err != OK:
            return True, where
        _write_out(out, value, term, truth)
    else:
        params = loss_params(inc, loss, q, n, p, work[PARAMS])
        err, where, n_above, term, truth = _solver_row(
            kernel, route, inc, params, s, y, p, work[FLOATS], work[INTS], neg_rank, solved
        )
        if err != OK:
            return True, where
        _write_out(out, row_value(inc, loss, q, n_above), term, truth)
    if gradient or rank.size or not _is_float64(coef):
        truth_pos, truth_neg = truth_coef(zero_one, gradient, n, p)
        finish_row(y, truth_pos, truth_neg, not zero_one, neg_rank, solved, rank, coef)
    return True, -1


@jit
def batch_rows(
    method, inc, loss, scores, is_pos, lead, lead_pos, gradient, rank, coef, out, valid, *work
):
    """Every row ``[lead[q] | scores[q]]`` (labels ``[lead_pos[q] | is_pos[q]]``; ``lead``
    may have no columns) by `solve_row`, into ``rank`` (no columns when the ranks are not
    wanted), ``coef``, ``out`` and ``valid``; ``work``: the arrays of `work_arrays` for rows
    of the lead's and the scores' columns. The arrays come one by one, not in tuples as
    `solve_row` takes them: numba unboxes an array in a tuple at several times the cost of
    an array argument. Returns the (query, sample) of the first non-finite score, (-1, -1)
    if none; the outputs are then not all filled.

    No allocation per row, no reference counted per row (the arrays are read through views
    without an owner, `qs._numba.unowned`), and no pass over the whole batch before the
    rows are solved."""
    scores, is_pos, lead, lead_pos = unowned((scores, is_pos, lead, lead_pos))
    rank, coef, out, valid = unowned((rank, coef, out, valid))
    loss, work = unowned(loss), unowned(work)
    n = lead.shape[1] + scores.shape[1]
    joined = np.empty(n if lead.shape[1] else 0, dtype=scores.dtype)
    y_row = work[LABELS][:n]
    for q in range(scores.shape[0]):
        given = _joined_row(lead[q], scores[q], joined)  # in the scores' dtype
        y = _joined_row(lead_pos[q], is_pos[q], y_row)
        solved, where = solve_row(
            method, inc, loss, q, given, y, gradient, rank[q], coef[q], out[q], work
        )
        valid[q] = solved
        if where >= 0:
            return q, where
    return -1, -1


@jit_inline
def _write_out(out, value, term, truth):
    """``out`` (loss, objective, ground-truth F, hinge) from the loss ``value``, the hinge's
    score term ``F(R_bar) - F(R*)`` and ``F(R*)``."""
    hinge = value + term
    out[0], out[1], out[2], out[3] = value, hinge + truth, truth, hinge


@jit
def _bucket_row(inc, params, scores, is_pos, p, neg_rank, coef, shift_pos, shift_neg, buckets):
    """One query by ``bucket`` (as bucket_lai) into ``neg_rank`` (the negatives' order) and
    ``coef`` (the output row, of its dtype: coefficients less ``shift_pos`` / ``shift_neg``
    at the positives / negatives). Returns (error, where, the negatives above each
    positive, the score term ``F(R_bar) - F(R*)``, ``F(R*)``)."""
    m = scores.size - p
    err, where, sum_pos, sum_neg, n_above, f = bucket_ranks(
        inc,
        params,
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
    return err, where, n_above, f, sum_pos / p - sum_neg / m


@jit
def _input_ranks_into(is_pos, neg_rank, rank):
    """``rank``: 0 at the positives, the negatives' ranks (``neg_rank``, at their input
    places) at theirs."""
    for k in range(is_pos.size):
        rank[k] = 0 if is_pos[k] else neg_rank[k]


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
def _solver_row(kernel, route, inc, params, scores, is_pos, p, floats, ints, neg_rank, coef):
    """One query by the per-query kernel of ``lai`` ``kernel`` (`RowMethod.kernel`, with
    `gathered_lai`'s ``route``), into ``neg_rank`` (the negatives' order) and ``coef``;
    ``floats`` and ``ints`` are `gathered_lai`'s work arrays. Returns (error, where, the
    negatives above each positive, the score term, ``F(R*)``)."""
    n = scores.size
    m = n - p
    ranks = neg_rank[:m]
    if kernel == GATHERED:  # as bucket_sort_lai, qs_lai, and auto_lai's sorting branch
        err, where, sum_pos, sum_neg, n_above, f = gathered_lai(
            inc, params, route, scores, is_pos, p, ranks, coef, floats, ints
        )
    else:  # the methods on np.sort's sorted negatives, as run_sorted
        v = np.empty(m)
        err, where, sum_pos, sum_neg, pos_sorted, pos_index, ref = scan_and_gather(
            scores, is_pos, p, v
        )
        if err != OK:
            return err, where, np.empty(0, dtype=np.int64), 0.0, 0.0
        v = np.sort(v)[::-1].copy()
        rk = np.empty(m, dtype=np.int64)
        err, where, sum_pos, sum_neg, n_above, f = sorted_kernel(
            kernel,
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
    return err, where, n_above, f, sum_pos / p - sum_neg / m


@jit
def sorted_kernel(
    kernel,
    inc,
    params,
    v,
    rk,
    scores,
    is_pos,
    pos_sorted,
    pos_index,
    neg_rank,
    coef,
    sum_pos,
    sum_neg,
    ref,
):
    """The kernel ``kernel`` (`SORT_DC`, `SCAN` or `SEARCH`) of the methods on ``np.sort``'s
    sorted negatives ``v``, with the arguments of `qs.inference._prepare.run_sorted`: a new
    kernel of that signature is a branch here and a code beside `SORT_DC`. (Dispatch through
    a tuple of these kernels, numba's first-class functions, is experimental in numba and
    warns at every compilation.)"""
    if kernel == SORT_DC:
        return sort_dc(
            inc,
            params,
            v,
            rk,
            scores,
            is_pos,
            pos_sorted,
            pos_index,
            neg_rank,
            coef,
            sum_pos,
            sum_neg,
            ref,
        )
    if kernel == SCAN:
        return scan_sorted(
            inc,
            params,
            v,
            rk,
            scores,
            is_pos,
            pos_sorted,
            pos_index,
            neg_rank,
            coef,
            sum_pos,
            sum_neg,
            ref,
        )
    return search_sorted(
        inc,
        params,
        v,
        rk,
        scores,
        is_pos,
        pos_sorted,
        pos_index,
        neg_rank,
        coef,
        sum_pos,
        sum_neg,
        ref,
    )
