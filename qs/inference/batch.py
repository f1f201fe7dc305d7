"""Loss-augmented inference for a batch of queries in one call: :func:`lai_batch`.

A mini-batch of a deep net ranks several queries at once (for instance the 10 one-vs-rest
classes of a CIFAR-10 batch). ``lai_batch`` takes their scores as rows of one (Q, n) array
and solves them in one compiled kernel that loops over the queries: one Python call per
mini-batch instead of Q. The kernel takes the method and the loss as integer codes, so that
it is compiled once for every method and both built-in losses and cached on disk like the
other kernels (:func:`qs._numba.jit`): a new process loads it instead of compiling.

Large batches are cut into blocks of queries run on threads (the kernels release the GIL);
small ones run in the calling thread, where a thread hand-off would cost more than the work
(measured: numba's ``prange`` took 9 ms for 10 queries of 256 samples on 2 busy cores, the
plain loop 0.05 ms; on the same 2 cores idle, AP, 36 us with numba's OpenMP threading layer
and 185 us with its workqueue layer against the loop's 46 us: too little gained where it
works, too much lost where the cores are shared).

A named method solves each query with the per-query kernel of :func:`qs.inference.lai`, so
objectives and ranks are those of ``lai`` row by row. ``"auto"`` chooses as ``lai`` does
(:func:`qs.inference.auto.sorts`): a query it leaves unsorted goes to ``bucket``, one it
sorts to the kernel of ``lai``'s default, and a small one (fewer than :data:`SMALL_ROW_MAX`
negatives), the common case in a mini-batch, is solved as ``bucket_sort`` does (the
negatives sorted by buckets, then Algorithm 1's divide and conquer on them, AP's sweep past
place P) but in the call's work arrays, with few branches that the input decides: at this
size a mispredicted branch costs more than the arithmetic (:func:`_small_row`).
Measured on 10 queries of 256 samples, 10% positives (`make bench-torch`, three runs):
ahead of ``bucket_sort`` (by 1.2-1.3x), ``qs`` (1.45-1.5x), ``search``, ``sort_dc`` and the
scan; the call 3.5-3.6 times ten single 0-1 kernels (AP; NDCG 3.4-3.45), 2.55 times
cheaper than ten ``lai`` calls (AP; NDCG 5.4-5.7). Of those ten 0-1 kernels' time, sorting
each query's negatives alone takes 1.9 (``np.sort``) or 1.1-1.2 (these buckets), and the
divide and conquer alone on sorted negatives 0.75-0.8: an exact method that sorts its
negatives stays above twice the 0-1 kernels on one thread.

Each query is solved in work arrays that the thread keeps from call to call (a float32 row
widened to float64, the coefficients, the ranks, the per-query kernels' work;
:func:`_work_arrays`), then written out in one pass that subtracts ``coef(R*)`` for the
gradient and stores the coefficients in the dtype asked for (:func:`_finish_row`): a float32
(Q, n) score matrix is neither copied to float64 nor its gradient made in float64, and the
finiteness of the scores is checked row by row by the pass that first reads them. A row may
come in two parts, a lead and the rest (``lead=``), joined as it is widened: a memory bank's
scores within the batch and against the bank, with no (Q, k + n) copy. Rows of
:data:`LAI_ROW_MIN` samples or more go to :func:`qs.inference.lai` one by one, which runs its
bucket method on threads within the row.
The loss values come from :func:`qs.losses.loss_value` and NDCG's increments from
:func:`qs.losses.ndcg_increments_into`, as ``lai``'s.

A query without a positive or without a negative has no ranking loss: it is skipped (loss,
objective and F zero, coefficients zero, ``valid`` False) rather than refused, since small
mini-batches meet such queries. Scores must be finite in every row, skipped or not.
"""

import functools
import threading
from typing import NamedTuple

import numpy as np
from numba import types
from numba.extending import overload

from qs._numba import BUILTIN_INCREMENTS, jit
from qs.inference import lai
from qs.inference import resolve as _resolve
from qs.inference._input import OK, reference, scan_and_gather
from qs.inference._ranks import opt_ranks_swept
from qs.inference._sorting import INSERTION_MAX, sort_positives
from qs.inference.auto import AUTO as ROUTE_AUTO
from qs.inference.auto import BUCKET_SORT as ROUTE_BUCKET_SORT
from qs.inference.auto import QS as ROUTE_QS
from qs.inference.auto import gathered_lai as _gathered_lai
from qs.inference.auto import sorts, work_floats, work_ints
from qs.inference.bucket import THREADED_MIN as BUCKET_THREADED_MIN
from qs.inference.bucket import _bucket, _map, n_buckets_for, thread_count
from qs.inference.bucket_sort import histogram_size
from qs.inference.qs import sort_dc as _sort_dc
from qs.inference.scan import scan_sorted as _scan_sorted
from qs.inference.search import search_sorted as _search_sorted
from qs.inference.zero_one import zero_one_lai
from qs.losses import AP_CODE, LOSSES, loss_value, ndcg_increments_into
from qs.validation import as_positive_mask2d

__all__ = ["BatchResult", "lai_batch"]

#: the losses ``lai_batch`` takes (their loss values are computed inside the kernel)
BATCH_LOSSES = ("ap", "ndcg", "01")
#: batches of at least this many samples (all queries together) run on threads, in blocks of
#: whole queries. As for one large query (:data:`qs.inference.bucket.THREADED_MIN`): on 2
#: cores shared with other jobs, threads lost at every size tried (16 x 10^5 samples: 141 vs
#: 130 ms; 64 x 2048: 12.1 vs 7.7 ms)
THREADED_MIN = 1 << 21
#: rows of at least this many samples go to :func:`qs.inference.lai` one by one, which runs
#: the default's bucket method on threads from this size on (within the row)
LAI_ROW_MIN = BUCKET_THREADED_MIN
#: the kernel's code of each method ("yue" and "chakrabarti" share the scan)
METHOD_CODES = {"auto": 0, "bucket_sort": 1, "bucket": 2, "qs": 3, "sort_dc": 4, "yue": 5,
                "chakrabarti": 5, "search": 6, "zero_one": 7}
AUTO, BUCKET_SORT, BUCKET, QS, SORT_DC, SCAN, SEARCH, ZERO_ONE = range(8)
#: the dtypes of scores read as they are (anything else is converted to float64) and of
#: the coefficients the call can write
FLOATS = (np.float64, np.float32)


class BatchResult(NamedTuple):
    """Per-query results of :func:`lai_batch`, row ``q`` for query ``q`` (a named tuple:
    built in a third of a frozen dataclass's time, a share of a small batch's call).

    rank : int32 (Q, n): interleaving rank of each negative at its input place, 0 at the
        positives (and everywhere in skipped rows and for the 0-1 loss); None when the call
        was made with ``ranks=False``.
    coef : (Q, n) of the call's ``coef_dtype`` (float64 by default): ``coef(R_bar)`` as in
        :class:`qs.inference.LAIResult`, or with ``gradient=True`` ``coef(R_bar) - coef(R*)``,
        the gradient of the structured hinge ``objective - ground_truth_F`` with respect to
        the scores.
    loss, objective, ground_truth_F : float64 (Q,), as in ``LAIResult``.
    valid : bool (Q,): the query has a positive and a negative (others are skipped, zeros).
    """

    rank: np.ndarray | None
    coef: np.ndarray
    loss: np.ndarray
    objective: np.ndarray
    ground_truth_F: np.ndarray
    valid: np.ndarray

    @property
    def hinge(self):
        """The structured hinge ``objective - ground_truth_F`` per query (0 if skipped)."""
        return self.objective - self.ground_truth_F


def lai_batch(scores, labels, loss="ap", method="auto", *, gradient=False, ranks=True,
              coef_dtype=np.float64, lead=None):
    """Loss-augmented inference of each row of ``scores`` (one query per row), in one call.

    Parameters
    ----------
    scores : array (Q, n) of finite numbers; float64 and float32 C-contiguous rows are read
        in place (a float32 row is widened to float64 row by row, in a work array, and solved
        as its float64 copy would be), anything else is converted to float64 once.
    labels : array (Q, n): 1/True positive, 0/-1/False negative.
    lead : None, or a pair ``(scores (Q, k), labels (Q, k))`` of entries that come first in
        each row: query ``q`` ranks ``[lead[0][q] | scores[q]]``, read from both arrays as
        the row is widened, with no (Q, k + n) copy made (a memory bank's scores within the
        batch, then against the bank). The outputs then have ``k + n`` columns, and a
        sample's index counts the lead's entries first.
    loss : "ap", "ndcg" or "01".
    method : a method of :data:`qs.inference.METHODS` that supports ``loss``.
    gradient : if True, ``coef`` holds ``coef(R_bar) - coef(R*)`` instead of ``coef(R_bar)``.
    ranks : if False, the result's ``rank`` is None and no ranks are written (a gradient
        needs only the coefficients).
    coef_dtype : float64 or float32: the dtype ``coef`` is written in (float32 halves the
        memory of a float32 network's gradient, and is the float64 value rounded).

    Returns a :class:`BatchResult`. Ties are broken as in :func:`qs.inference.lai`.
    """
    if not (isinstance(loss, str) and loss in BATCH_LOSSES):
        raise ValueError(f"lai_batch takes loss in {list(BATCH_LOSSES)}; got {loss!r}.")
    if not isinstance(method, str):
        _resolve(loss, method)  # raises: methods are named
    code, inc = _codes(loss, method)
    if np.dtype(coef_dtype) not in FLOATS:
        raise ValueError(f"coef_dtype must be float64 or float32; got {coef_dtype!r}.")
    scores = _as_scores2d(scores)
    is_pos = as_positive_mask2d(labels, scores.shape)
    lead_scores, lead_pos = _as_lead(lead, scores)
    q, n = scores.shape[0], lead_scores.shape[1] + scores.shape[1]
    rank = np.empty((q, n if ranks else 0), dtype=np.int32)
    coef = np.empty((q, n), dtype=coef_dtype)
    out = np.empty((q, 3))  # loss, objective, ground-truth F
    valid = np.empty(q, dtype=np.bool_)
    rows_of = (lead_scores, scores)
    if code is None:  # the exhaustive oracle: per query, for tests on tiny inputs
        whole = np.concatenate(rows_of, axis=1)
        _check_finite(rows_of, _first_not_finite(whole))
        _brute_rows(whole, np.concatenate((lead_pos, is_pos), axis=1), loss, gradient, rank,
                    coef, out, valid)
    elif n >= LAI_ROW_MIN:
        _lai_rows(rows_of, (lead_pos, is_pos), loss, method, gradient, rank, coef, out, valid)
    else:
        table, ideal = _discount(loss, n)

        def rows(a, b):
            qq, kk = _batch(code, inc, scores[a:b], is_pos[a:b], lead_scores[a:b],
                            lead_pos[a:b], table, ideal, gradient, rank[a:b], coef[a:b],
                            out[a:b], valid[a:b], *_work_arrays(n))
            return (a + qq, kk) if kk >= 0 else None

        if q * n < THREADED_MIN or q == 1:
            where = rows(0, q)
        else:
            blocks = np.linspace(0, q, min(q, 2 * thread_count()) + 1).astype(np.int64)
            where = min((b for b in _map(rows, blocks[:-1], blocks[1:]) if b), default=None)
        _check_finite(rows_of, where)
    return BatchResult(rank if ranks else None, coef, out[:, 0], out[:, 1], out[:, 2], valid)


#: rows of at most this many samples are solved in work arrays that each thread keeps from
#: one call to the next (:func:`_work_arrays`): about 100 bytes of address space per sample,
#: of which only what the rows use is touched. Calls that allocated them afresh paid for
#: their new pages: on 4 rows of 10^5 samples, 10% positives (rows the default sorts), 15.7
#: ms per call against 11.2 ms with the arrays held (4 calls of lai: 12.7 ms; CPU time)
HELD_MAX = 1 << 20
_held = threading.local()
_NONE_HELD = (np.empty(0), np.empty(0, dtype=np.uint8), np.empty(0), np.empty(0, dtype=np.int32),
              np.empty(0), np.empty(0), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint16))


def _work_arrays(n):
    """The kernel's work arrays for rows of ``n`` samples: (row, labels, coefficients,
    ranks, increments, floats, ints, buckets) as :func:`_batch` takes them, this thread's (grown
    to ``n``, never shrunk; floats and ints sized for any share of positives,
    :func:`qs.inference.auto.work_floats` and ``work_ints``) for ``n`` up to
    :data:`HELD_MAX`. Longer rows get empty arrays, and the kernel allocates those it uses
    (its allocations take 4 KiB pages, numpy's of 4 MiB and more huge pages where the
    system allows: at 4 rows of 10^6 samples, 0.1% positives, 2 threads, the kernel
    allocating per block of rows took 37 ms of CPU time, the held arrays 29, 4 calls of
    lai 28)."""
    if n > HELD_MAX:
        return _NONE_HELD
    arrays = getattr(_held, "arrays", None)
    if arrays is None or arrays[0].size < n:
        arrays = _held.arrays = (
            np.empty(n), np.empty(n, dtype=np.uint8), np.empty(n), np.empty(n, dtype=np.int32),
            np.empty(n + 1), np.empty(work_floats(0, n)),
            np.empty(work_ints(0, n) + histogram_size(n, 0), dtype=np.int64),
            np.empty(n, dtype=np.uint16))
    return arrays


def _as_lead(lead, scores):
    """The lead's scores (in the scores' dtype, C-contiguous) and labels (uint8), (Q, 0)
    arrays when there is none: the kernel is compiled once for both cases."""
    if lead is None:
        return (np.empty((scores.shape[0], 0), dtype=scores.dtype),
                np.empty((scores.shape[0], 0), dtype=np.uint8))
    if not (isinstance(lead, tuple) and len(lead) == 2):
        raise ValueError(f"lead must be a pair (scores, labels); got {type(lead).__name__}.")
    lead_scores = _as_scores2d(lead[0])
    if len(lead_scores) != len(scores):
        raise ValueError(f"lead scores must have one row per query ({len(scores)}); got shape "
                         f"{lead_scores.shape}.")
    lead_scores = np.ascontiguousarray(lead_scores, dtype=scores.dtype)
    return lead_scores, as_positive_mask2d(lead[1], lead_scores.shape)


@functools.lru_cache(maxsize=64)
def _codes(loss, method):
    """The kernel's codes of ``method`` (None for "brute") and of the loss's increment (-1
    for the 0-1 loss), once per (loss, method): resolving them costs a share of a small
    batch's call."""
    loss_obj, method = _resolve(loss, method)
    return (None if method == "brute" else METHOD_CODES[method],
            -1 if loss_obj is None else BUILTIN_INCREMENTS[loss_obj.kernel])


def _as_scores2d(scores):
    """Scores as a 2-D C-contiguous array of float64 or float32 (no copy when already so;
    other dtypes are converted to float64); finiteness is checked by the kernel, in the
    pass that reads them."""
    arr = np.asarray(scores)
    if arr.ndim != 2:
        raise ValueError(f"scores must be a 2-D array of shape (queries, samples); got shape "
                         f"{arr.shape}.")
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"scores must be numeric; got dtype {arr.dtype}.")
    dtype = arr.dtype if arr.dtype in FLOATS and arr.dtype.isnative else np.float64
    return np.ascontiguousarray(arr, dtype=dtype)


def _first_not_finite(scores):
    """(query, sample) of the first non-finite score, or None."""
    finite = np.isfinite(scores)
    return None if finite.all() else tuple(np.argwhere(~finite)[0])


def _check_finite(rows_of, where):
    """Raise for the non-finite score at ``where`` (query, sample) of the rows made of the
    column blocks ``rows_of`` (the lead's scores, then the scores); nothing if None."""
    if where is not None:
        qq, kk = (int(x) for x in where)
        lead_scores, scores = rows_of
        k = lead_scores.shape[1]
        value = lead_scores[qq, kk] if kk < k else scores[qq, kk - k]
        raise ValueError(f"scores must be finite; got {float(value)!r} at query {qq}, "
                         f"sample {kk}. Remove or impute NaN/inf scores before inference.")


@functools.lru_cache(maxsize=4)
def _discount(loss, n):
    """NDCG's discount ``D(1..n+1)`` and its prefix sums ``C(P) = sum_{k<=P} D(k)`` (index
    P-1), shared by all queries of n samples; empty for the other losses."""
    if loss != "ndcg":
        return np.zeros(0), np.zeros(0)
    d = LOSSES["ndcg"].discount(np.arange(1, n + 2))
    return d, np.cumsum(d)


def _lai_rows(rows_of, labels_of, loss, method, gradient, rank, coef, out, valid):
    """The rows, each made of the column blocks ``rows_of`` (scores) and ``labels_of``
    (their labels), by :func:`qs.inference.lai` one by one (rows of at least
    :data:`LAI_ROW_MIN` samples: its methods' threads, within the row), into work arrays,
    then written out as the kernel writes its rows (:func:`_finish_row`)."""
    (lead_scores, scores), (lead_pos, is_pos) = rows_of, labels_of
    k = lead_scores.shape[1]
    n = k + scores.shape[1]
    row = np.empty(n) if scores.dtype != np.float64 or k else None
    y_row = np.empty(n, dtype=np.uint8) if k else None
    neg_rank, coef64 = np.empty(n, dtype=np.int32), np.empty(n)
    for q in range(scores.shape[0]):
        s, y = scores[q], is_pos[q]
        if row is not None:
            s = row
            s[:k], s[k:] = lead_scores[q], scores[q]
        if y_row is not None:
            y = y_row
            y[:k], y[k:] = lead_pos[q], is_pos[q]
        p = int(np.count_nonzero(y))
        valid[q] = 0 < p < n
        if not valid[q]:
            bad = _first_not_finite(s[None])
            _check_finite(rows_of, None if bad is None else (q, bad[1]))
            coef[q] = 0.0
            rank[q] = 0
            out[q] = 0.0
            continue
        zero_one = loss == "01"
        try:
            solved = coef[q] if coef.dtype == np.float64 else coef64
            res = lai(s, y, loss, method, out=(None if zero_one else neg_rank[: n - p], solved))
        except ValueError:
            bad = _first_not_finite(s[None])
            if bad is None:
                raise
            _check_finite(rows_of, (q, bad[1]))
        truth_pos, truth_neg = _truth_coef(zero_one, gradient, n, p)
        _finish_row(y, truth_pos, truth_neg, not zero_one, True, neg_rank, solved, rank[q],
                    coef[q])
        out[q] = res.loss, res.objective, res.ground_truth_F


# ---------------------------------------------------------------------------- the kernel

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
    """``[lead | row]`` written into ``buf`` (in its dtype); returns ``buf``."""
    k = lead.size
    for t in range(k):
        buf[t] = lead[t]
    for t in range(row.size):
        buf[k + t] = row[t]
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
def _batch(method, inc, scores, is_pos, lead, lead_pos, table, ideal, gradient, rank, coef,
           out, valid, row, y_row, coef64, neg_rank, params, floats, ints, buckets):
    """Every row ``[lead[q] | scores[q]]`` (labels ``[lead_pos[q] | is_pos[q]]``; ``lead``
    may have no columns) by the method of code ``method``, the loss of code ``inc``
    (:data:`qs.losses.AP_CODE` or ``NDCG_CODE``; unused for the 0-1 loss); ``rank`` has no
    columns when the ranks are not wanted. Returns the (query, sample) of the first
    non-finite score, (-1, -1) if none; the outputs are then not all filled.

    Each row is solved in work arrays held for the whole call (the row widened to float64
    when it is not, or made of the lead and the scores, the coefficients unless the output
    is float64, the ranks, the per-query kernels' work), then written out by one pass
    (:func:`_finish_row`; none when there is nothing to subtract, convert or scatter): no
    allocation per row, and no pass over the whole batch before the rows are solved. The
    work arrays ``row`` .. ``buckets`` (:func:`_work_arrays`) are at least as long as a row
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
            err, where = _bucket_row(inc, given, y, p, table, ideal, params, neg_rank, coef[q],
                                     truth_pos, truth_neg, buckets, out[q])
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
            err, where, value, dot, truth = zero_one_lai(s, y, solved)
            out[q, 0], out[q, 1], out[q, 2] = value, value + dot, truth
        elif method == AUTO and m < SMALL_ROW_MAX and sorts(m, p):
            err, where = OK, _not_finite_at(s)
            if where < 0:
                if work.shape[1] < n + 2:
                    work = np.empty((6, n + 2))
                    iwork = np.empty((6, n + 2), dtype=np.int64)
                    count = np.empty(BUCKETS_PER_NEGATIVE * n + 2, dtype=np.int64)
                _small_row(inc, s, y, p, table, ideal, work, iwork, count, neg_rank,
                           solved, out[q])
                compact = False
        else:
            if method == AUTO or method == BUCKET_SORT or method == QS:
                if floats.size < work_floats(m, p):
                    floats = np.empty(work_floats(m, p))
                if ints.size < work_ints(m, p):
                    ints = np.empty(work_ints(m, p), dtype=np.int64)
            err, where = _solver_row(method, inc, s, y, p, table, ideal, params, floats,
                                     ints, neg_rank, solved, out[q])
        if err != OK or where >= 0:
            return q, where
        if gradient or rank.shape[1] or not _is_float64(coef):
            truth_pos, truth_neg = _truth_coef(zero_one, gradient, n, p)
            _finish_row(y, truth_pos, truth_neg, not zero_one, compact, neg_rank, solved,
                        rank[q], coef[q])
    return -1, -1


@jit
def _bucket_row(inc, scores, is_pos, p, table, ideal, params, neg_rank, coef, shift_pos,
                shift_neg, buckets, out):
    """One query by ``bucket`` (as bucket_lai) into ``neg_rank`` (the negatives' order) and
    ``coef`` (the output row, of its dtype: coefficients less ``shift_pos`` / ``shift_neg``
    at the positives / negatives). Returns (error, where) of the kernel."""
    m = scores.size - p
    err, where, sum_pos, sum_neg, n_above, f = _bucket(
        inc, _params_into(inc, table, ideal, p, params), scores, is_pos, p, n_buckets_for(p, m),
        neg_rank[:m], coef, shift_pos, shift_neg, buckets)
    if err != OK:
        return err, where
    value = loss_value(inc, n_above, _ideal(inc, ideal, p))
    out[0], out[1], out[2] = value, value + f, sum_pos / p - sum_neg / m
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
def _params_into(inc, table, ideal, n_pos, params):
    """The loss's increment parameters for P positives (:meth:`qs.losses.QSLoss.prepare`),
    written in ``params``: none for AP, NDCG's table."""
    if inc == AP_CODE:
        return params[:0]
    return ndcg_increments_into(table, ideal[n_pos - 1], params)


@jit
def _ideal(inc, ideal, n_pos):
    """NDCG's ``C(P)`` for P positives (1.0, unused, for AP)."""
    return 1.0 if inc == AP_CODE else ideal[n_pos - 1]


@jit
def _solver_row(method, inc, scores, is_pos, p, table, ideal, params, floats, ints, neg_rank,
                coef, out):
    """One query by the per-query kernel of ``lai`` with the method of code ``method``, into
    ``neg_rank`` (the negatives' order) and ``coef``; ``floats`` and ``ints`` are
    :func:`qs.inference.auto._gathered_lai`'s work arrays. Returns (error, where) of the
    kernel."""
    n = scores.size
    m = n - p
    params = _params_into(inc, table, ideal, p, params)
    ranks = neg_rank[:m]
    if method == BUCKET_SORT or method == QS or (method == AUTO and sorts(m, p)):
        # as bucket_sort_lai, qs_lai, and auto_lai's sorting branch
        route = ROUTE_QS if method == QS else ROUTE_AUTO if method == AUTO else ROUTE_BUCKET_SORT
        err, where, sum_pos, sum_neg, n_above, f = _gathered_lai(
            inc, params, route, scores, is_pos, p, ranks, coef, floats, ints)
    else:  # the methods on np.sort's sorted negatives, as run_sorted
        v = np.empty(m)
        err, where, sum_pos, sum_neg, pos_sorted, pos_index, ref = scan_and_gather(scores, is_pos,
                                                                                   p, v)
        if err != OK:
            return err, where
        v = np.sort(v)[::-1].copy()
        rk = np.empty(m, dtype=np.int64)
        if method == SORT_DC:
            err, where, sum_pos, sum_neg, n_above, f = _sort_dc(
                inc, params, v, rk, scores, is_pos, pos_sorted, pos_index, ranks, coef,
                sum_pos, sum_neg, ref)
        elif method == SCAN:
            err, where, sum_pos, sum_neg, n_above, f = _scan_sorted(
                inc, params, v, rk, scores, is_pos, pos_sorted, pos_index, ranks, coef,
                sum_pos, sum_neg, ref)
        else:
            err, where, sum_pos, sum_neg, n_above, f = _search_sorted(
                inc, params, v, rk, scores, is_pos, pos_sorted, pos_index, ranks, coef,
                sum_pos, sum_neg, ref)
    if err != OK:
        return err, where
    value = loss_value(inc, n_above, _ideal(inc, ideal, p))
    out[0], out[1], out[2] = value, value + f, sum_pos / p - sum_neg / m
    return OK, -1


@jit
def _sort_few_positives(values, index, p, sorted_values, sorted_index):
    """``values[:p]`` (``index`` along) in descending order into ``sorted_values`` /
    ``sorted_index``, ties in input order: each value's place counted (p^2 comparisons
    without a branch; for p up to :data:`INSERTION_MAX`)."""
    for a in range(p):
        x = values[a]
        place = 0
        for b in range(p):
            y = values[b]
            place += (y > x) | ((y == x) & (b < a))
        sorted_values[place] = x
        sorted_index[place] = index[a]


#: the default's rows of at least this many negatives go to the kernel of ``lai`` even where
#: they are sorted: :func:`_small_row`'s one histogram of two buckets per negative outgrows the
#: cache, where that kernel's sort goes by coarse buckets first
SMALL_ROW_MAX = 1 << 14
#: buckets per negative of the small-query route: two halve the negatives an insertion moves
#: (the branch that mispredicts), for a longer pass over the counts (measured on 10 queries
#: of 256 normal scores: 10-20% less time than one; four no better than two)
BUCKETS_PER_NEGATIVE = 2
#: moves per negative the insertion pass of :func:`_small_row` may make before it leaves the
#: rest to a merge sort (many distinct scores in one bucket: an outlier stretched the range)
INSERTION_MOVES = 8


@jit
def _insertion_pass(v, idx, size, budget):
    """Insertion sort of ``v[:size]`` (descending, ties keep their order), ``idx`` along;
    False, partly sorted, once it has made more than ``budget`` moves."""
    for a in range(1, size):
        x, ix = v[a], idx[a]
        b = a
        while b > 0 and v[b - 1] < x:
            v[b], idx[b] = v[b - 1], idx[b - 1]
            b -= 1
        v[b], idx[b] = x, ix
        budget -= a - b
        if budget < 0:
            return False
    return True


@jit
def _small_row(inc, scores, is_pos, p, table, ideal, work, iwork, count, rank, coef, out):
    """One query of few negatives, in the work arrays ``work`` / ``iwork`` (rows of n + 2)
    and ``count`` (:data:`BUCKETS_PER_NEGATIVE` n + 2); ``rank`` is written at the
    negatives' input places only, ``coef`` (``coef(R_bar)``) at every place.

    Written against the branch predictor (the input decides each branch, and a mispredicted
    one costs as much as a dozen operations): one pass over the scores, without a branch on
    the labels, gathers the positives and the negatives, sums their scores and finds the
    negatives' range; buckets over that range, the negatives placed by bucket (input order
    within one) and one insertion pass (or a stable merge sort, should it move too much)
    sort them, ties in input order; then Algorithm 1's divide and conquer, and one pass from
    the sorted negatives to their ranks and coefficients.
    """
    n = scores.size
    m = n - p
    v, sorted_v, pos_values, spos, params, pos_sorted = (work[0], work[1], work[2], work[3],
                                                         work[4], work[5])
    idx, sorted_idx, pos_index, rk, pos_order, bucket = (iwork[0], iwork[1], iwork[2],
                                                         iwork[3], iwork[4], iwork[5])
    ref = reference(scores)
    sum_pos = 0.0
    sum_neg = 0.0
    low = np.inf
    high = -np.inf
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
    top = BUCKETS_PER_NEGATIVE * m - 1
    scale = (top + 1) / (high - low) if high > low else 0.0
    if not np.isfinite(scale):
        scale = 0.0
    for t in range(m):  # no branch: vectorised
        x = (v[t] - low) * scale  # in 0..top+1 but for rounding (NaN if the range overflows)
        bucket[t] = min(np.int64(x) if x >= 1.0 else 0, top)
    count[: top + 1] = 0
    for t in range(m):
        count[bucket[t]] += 1
    placed = 0
    for t in range(top, -1, -1):  # the highest bucket first; count becomes where each starts
        c = count[t]
        count[t] = placed
        placed += c
    for t in range(m):
        at = count[bucket[t]]
        sorted_v[at] = v[t]
        sorted_idx[at] = idx[t]
        count[bucket[t]] = at + 1
    if not _insertion_pass(sorted_v, sorted_idx, m, INSERTION_MOVES * m):
        order = np.argsort(-sorted_v[:m], kind="mergesort")  # stable: ties keep input order
        sorted_v[:m] = sorted_v[:m][order]
        sorted_idx[:m] = sorted_idx[:m][order]
    if p <= INSERTION_MAX:
        _sort_few_positives(pos_values, pos_index, p, pos_sorted, pos_order)
    else:
        pos_sorted[:p], pos_order[:p] = sort_positives(pos_values[:p], pos_index[:p])
    c2 = 2.0 / (p * m)
    spos[0] = ref
    for i in range(p):
        spos[i + 1] = c2 * (pos_sorted[i] - ref)
    opt_ranks_swept(sorted_v[:m], rk, inc, _params_into(inc, table, ideal, p, params), p, c2,
                    spos)
    # as rank_pass and finish: ranks and coefficients of the negatives and the negatives per
    # rank; F summed over the negatives in input order, then over the positives by score
    inv = 1.0 / (p * m)
    count[: p + 2] = 0
    for t in range(m):
        k = sorted_idx[t]
        r = rk[t]
        rank[k] = r
        coef[k] = (p + 2 - 2 * r) * inv
        count[r] = t + 1  # ranks ascend: the negatives of rank at most r (a store, no count)
    dot = 0.0
    for t in range(m):  # the negatives as gathered: in input order
        dot += (p + 2 - 2 * rank[idx[t]]) * inv * (v[t] - ref)
    n_above = bucket[:p]  # the negatives' buckets are read: the row is free
    above = 0
    for k in range(p):
        above = max(above, count[k + 1])
        n_above[k] = above
        c = (m - 2.0 * above) * inv
        coef[pos_order[k]] = c
        dot += c * (pos_sorted[k] - ref)
    value = loss_value(inc, n_above, _ideal(inc, ideal, p))
    out[0], out[1], out[2] = value, value + dot, sum_pos / p - sum_neg / m


def _brute_rows(scores, is_pos, loss, gradient, rank, coef, out, valid):
    """:func:`lai` with method "brute", row by row (``rank`` without columns: none kept)."""
    n = scores.shape[1]
    n_pos = is_pos.sum(axis=1, dtype=np.int64)
    valid[:] = (n_pos > 0) & (n_pos < n)
    rank[:] = 0
    coef[:] = 0.0
    out[:] = 0.0
    for q in np.flatnonzero(valid):
        pos = is_pos[q].astype(bool)
        res = lai(scores[q], pos, loss, "brute")
        if rank.shape[1]:
            rank[q, ~pos] = res.neg_rank
        coef[q] = res.coef
        if gradient:
            coef[q] -= np.where(pos, 1.0 / n_pos[q], -1.0 / (n - n_pos[q]))
        out[q] = res.loss, res.objective, res.ground_truth_F
