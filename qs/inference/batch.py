"""Loss-augmented inference for a batch of queries in one call: `lai_batch`.

A mini-batch of a deep net ranks several queries at once (for instance the 10 one-vs-rest
classes of a CIFAR-10 batch). ``lai_batch`` takes their scores as rows of one (Q, n) array
and solves them in one compiled kernel that loops over the queries
(`qs.inference._batch_rows`; small queries by `qs.inference._batch_small`): one
Python call per mini-batch instead of Q, with the objectives and ranks of
`qs.inference.lai` row by row.

Large batches are cut into blocks of queries run on threads (the kernels release the GIL);
small ones run in the calling thread, where a thread hand-off would cost more than the work
(numba's ``prange`` gained too little where it works and lost too much where the cores are
shared: docs/inference_design.md, "The batch kernels"). Rows of `LAI_ROW_MIN` samples or
more go to `qs.inference.lai` one by one, which runs its bucket method on threads
within the row. A row may come in two parts, a lead and the rest (``lead=``): a memory
bank's scores within the batch and against the bank, with no (Q, k + n) copy.

A query without a positive or without a negative has no ranking loss: it is skipped (loss,
objective and F zero, coefficients zero, ``valid`` False) rather than refused, since small
mini-batches meet such queries. Scores must be finite in every row, skipped or not.
"""

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from qs.inference import lai, resolve
from qs.inference._batch_rows import (
    batch_rows,
    finish_row,
    finish_values,
    row_loss,
    row_method,
    truth_coef,
    work_arrays,
)
from qs.inference.bucket import THREADED_MIN as BUCKET_THREADED_MIN
from qs.inference.bucket import thread_count, thread_map
from qs.losses import QSLoss
from qs.validation import as_positive_mask2d

__all__ = ["BatchResult", "lai_batch"]

#: the losses ``lai_batch`` takes by name (beside any `qs.losses.QSLoss` instance)
BATCH_LOSSES = ("ap", "ndcg", "01")
#: batches of at least this many samples (all queries together) run on threads, in blocks of
#: whole queries, as for one large query (`qs.inference.bucket.THREADED_MIN`)
THREADED_MIN = 1 << 21
#: rows of at least this many samples go to `qs.inference.lai` one by one, which runs
#: the default's bucket method on threads from this size on (within the row)
LAI_ROW_MIN = BUCKET_THREADED_MIN
#: the dtypes of scores read as they are (anything else is converted to float64) and of
#: the coefficients the call can write
FLOATS = (np.float64, np.float32)


class BatchResult(NamedTuple):
    """Per-query results of `lai_batch`, row ``q`` for query ``q``.

    A named tuple: built in a third of a frozen dataclass's time, a share of a small batch's
    call.

    Attributes
    ----------
    rank : ndarray of shape (Q, n), int32, or None
        The interleaving rank of each negative at its input place, 0 at the positives (and
        everywhere in skipped rows and for the 0-1 loss); None with ``ranks=False``.
    coef : ndarray of shape (Q, n)
        Of the call's ``coef_dtype`` (float64 by default): ``coef(R_bar)`` as in
        `qs.inference.LAIResult`, or with ``gradient=True`` ``coef(R_bar) - coef(R*)``, the
        gradient of the structured hinge with respect to the scores.
    loss : ndarray of shape (Q,), float64
        As in ``LAIResult``.
    objective : ndarray of shape (Q,), float64
        As in ``LAIResult``.
    ground_truth_F : ndarray of shape (Q,), float64
        As in ``LAIResult``.
    valid : ndarray of shape (Q,), bool
        The query has a positive and a negative (the others are skipped: zeros).
    hinge : ndarray of shape (Q,), float64
        The structured hinge ``objective - ground_truth_F`` per query (0 if skipped),
        summed as ``LAIResult.hinge`` is: exact to rounding at any spread of the scores.

    Examples
    --------
    >>> scores = np.array([[0.9, 0.8, 0.1, 0.5], [0.1, 0.2, 0.3, 0.4]])
    >>> result = lai_batch(scores, np.array([[1, 0, 1, 0], [1, 1, 1, 1]]))
    >>> result.rank.tolist(), result.valid.tolist(), result.hinge.tolist()
    ([[0, 1, 0, 2], [0, 0, 0, 0]], [True, False], [1.0, 0.0])
    """

    rank: np.ndarray | None
    coef: np.ndarray
    loss: np.ndarray
    objective: np.ndarray
    ground_truth_F: np.ndarray
    valid: np.ndarray
    hinge: np.ndarray


def lai_batch(
    scores: npt.ArrayLike,
    labels: npt.ArrayLike,
    loss: str | QSLoss = "ap",
    method: str = "auto",
    *,
    gradient: bool = False,
    ranks: bool = True,
    coef_dtype: npt.DTypeLike = np.float64,
    lead: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
) -> BatchResult:
    """Loss-augmented inference of each row of `scores` (one query per row), in one call.

    Parameters
    ----------
    scores : array_like of shape (Q, n)
        Finite scores, one query per row. float64 and float32 C-contiguous rows are read in
        place (a float32 row is widened row by row and solved as its float64 copy would be);
        anything else is converted to float64 once.
    labels : array_like of shape (Q, n)
        1 (or True) at the positives, 0, -1 (or False) at the negatives.
    loss : str or QSLoss, default "ap"
        "ap", "ndcg", "01" (`qs.inference.batch.BATCH_LOSSES`), or an instance of
        [qs.losses.QSLoss][] (compiled into the kernel on its first use in a process).
    method : str, default "auto"
        A method of [METHODS][qs.inference.METHODS] that supports `loss`.
    gradient : bool, default False
        If True, `coef` holds ``coef(R_bar) - coef(R*)`` (the structured hinge's gradient
        with respect to the scores) instead of ``coef(R_bar)``.
    ranks : bool, default True
        If False, the result's `rank` is None and no ranks are written (a gradient needs only
        the coefficients).
    coef_dtype : dtype, default float64
        float64 or float32: the dtype `coef` is written in (float32 is the float64 value
        rounded, at half the memory).
    lead : tuple of two array_like of shape (Q, k), optional
        Scores and labels of entries that come first in each row: query ``q`` ranks
        ``[lead[0][q] | scores[q]]`` with no (Q, k + n) copy made (a memory bank's scores
        within the batch, then against the bank). The outputs then have ``k + n`` columns,
        the lead's entries first.

    Returns
    -------
    BatchResult
        Per-query ranks, coefficients, losses, objectives, ground-truth score terms and
        which queries were solved (a query without a positive or a negative is skipped).

    Raises
    ------
    ValueError
        On a non-finite score (naming the query and the sample), labels that are not binary,
        shapes that differ, or a loss or method it does not take.

    Notes
    -----
    Ties are broken as in [lai][qs.inference.lai], and each row's result equals ``lai``'s.

    Examples
    --------
    >>> from qs.inference.batch import lai_batch
    >>> result = lai_batch([[2.0, 1.0, 0.5, -1.0], [0.0, 1.0, 2.0, 3.0]],
    ...                    [[1, 0, 1, 0], [1, 1, 0, 0]], loss="ap")
    >>> result.rank.tolist()
    [[0, 2, 0, 3], [0, 0, 1, 1]]
    >>> np.round(result.loss, 4).tolist()
    [0.1667, 0.5833]
    """
    if not (isinstance(loss, QSLoss) or (isinstance(loss, str) and loss in BATCH_LOSSES)):
        raise ValueError(f"lai_batch takes loss in {list(BATCH_LOSSES)} or a QSLoss; got {loss!r}.")
    if not isinstance(method, str):
        resolve(loss, method)  # raises: methods are named
    record, inc, loss_obj = row_method(loss, method)
    if np.dtype(coef_dtype) not in FLOATS:
        raise ValueError(f"coef_dtype must be float64 or float32; got {coef_dtype!r}.")
    scores = _as_scores2d(scores)
    is_pos = as_positive_mask2d(labels, scores.shape)
    lead_scores, lead_pos = _as_lead(lead, scores)
    q, n = scores.shape[0], lead_scores.shape[1] + scores.shape[1]
    rank = np.empty((q, n if ranks else 0), dtype=np.int32)
    coef = np.empty((q, n), dtype=coef_dtype)
    out = np.empty((q, 4))  # loss, objective, ground-truth F, hinge
    valid = np.empty(q, dtype=np.bool_)
    rows_of = (lead_scores, scores)
    if record is None:  # the exhaustive oracle: per query, for tests on tiny inputs
        whole = np.concatenate(rows_of, axis=1)
        _check_finite(rows_of, _first_not_finite(whole))
        _brute_rows(
            whole,
            np.concatenate((lead_pos, is_pos), axis=1),
            loss,
            gradient,
            rank,
            coef,
            out,
            valid,
        )
    elif n >= LAI_ROW_MIN:
        _lai_rows(rows_of, (lead_pos, is_pos), loss, method, gradient, rank, coef, out, valid)
    else:

        def sizes():
            p = np.count_nonzero(is_pos, axis=1) + np.count_nonzero(lead_pos, axis=1)
            return np.stack((p, np.full(q, n)), axis=1)

        loss_rows = row_loss(loss_obj, n, sizes)

        def rows(a, b):
            qq, kk = batch_rows(
                record,
                inc,
                loss_rows,
                scores[a:b],
                is_pos[a:b],
                lead_scores[a:b],
                lead_pos[a:b],
                gradient,
                rank[a:b],
                coef[a:b],
                out[a:b],
                valid[a:b],
                *work_arrays(n),
            )
            return (a + qq, kk) if kk >= 0 else None

        if q * n < THREADED_MIN or q == 1:
            where = rows(0, q)
        else:
            blocks = np.linspace(0, q, min(q, 2 * thread_count()) + 1).astype(np.int64)
            where = min((b for b in thread_map(rows, blocks[:-1], blocks[1:]) if b), default=None)
        _check_finite(rows_of, where)
        if loss_rows[5].size:
            finish_values(loss_obj, loss_rows, sizes(), out, valid)
    return BatchResult(
        rank if ranks else None, coef, out[:, 0], out[:, 1], out[:, 2], valid, out[:, 3]
    )


def _as_lead(lead, scores):
    """The lead's scores (in the scores' dtype, C-contiguous) and labels (uint8), (Q, 0)
    arrays when there is none: the kernel is compiled once for both cases."""
    if lead is None:
        return (
            np.empty((scores.shape[0], 0), dtype=scores.dtype),
            np.empty((scores.shape[0], 0), dtype=np.uint8),
        )
    if not (isinstance(lead, tuple) and len(lead) == 2):
        raise ValueError(f"lead must be a pair (scores, labels); got {type(lead).__name__}.")
    lead_scores = _as_scores2d(lead[0])
    if len(lead_scores) != len(scores):
        raise ValueError(
            f"lead scores must have one row per query ({len(scores)}); got shape "
            f"{lead_scores.shape}."
        )
    lead_scores = np.ascontiguousarray(lead_scores, dtype=scores.dtype)
    return lead_scores, as_positive_mask2d(lead[1], lead_scores.shape)


def _as_scores2d(scores: npt.ArrayLike) -> np.ndarray:
    """Scores as a 2-D C-contiguous array of float64 or float32 (no copy when already so;
    other dtypes are converted to float64); finiteness is checked by the kernel, in the
    pass that reads them."""
    arr = np.asarray(scores)
    if arr.ndim != 2:
        raise ValueError(
            f"scores must be a 2-D array of shape (queries, samples); got shape {arr.shape}."
        )
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
        raise ValueError(
            f"scores must be finite; got {float(value)!r} at query {qq}, "
            f"sample {kk}. Remove or impute NaN/inf scores before inference."
        )


def _lai_rows(rows_of, labels_of, loss, method, gradient, rank, coef, out, valid):
    """The rows, each made of the column blocks ``rows_of`` (scores) and ``labels_of``
    (their labels), by `qs.inference.lai` one by one (rows of at least
    `LAI_ROW_MIN` samples: its methods' threads, within the row), into work arrays,
    then written out as the kernel writes its rows (`finish_row`)."""
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
        zero_one = isinstance(loss, str) and loss == "01"
        try:
            solved = coef[q] if coef.dtype == np.float64 else coef64
            res = lai(s, y, loss, method, out=(None if zero_one else neg_rank[: n - p], solved))
        except ValueError:
            bad = _first_not_finite(s[None])
            if bad is None:
                raise
            _check_finite(rows_of, (q, bad[1]))
        truth_pos, truth_neg = truth_coef(zero_one, gradient, n, p)
        finish_row(y, truth_pos, truth_neg, not zero_one, neg_rank, solved, rank[q], coef[q])
        out[q] = res.loss, res.objective, res.ground_truth_F, res.hinge


def _brute_rows(scores, is_pos, loss, gradient, rank, coef, out, valid):
    """`lai` with method "brute", row by row (``rank`` without columns: none kept)."""
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
        out[q] = res.loss, res.objective, res.ground_truth_F, res.hinge
