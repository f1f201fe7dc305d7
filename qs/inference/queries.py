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

from qs._numba import jit, unowned
from qs.inference import lai
from qs.inference._batch_rows import row_loss, row_method, solve_row, work_arrays
from qs.inference.batch import FLOATS
from qs.inference.bucket import thread_count, thread_map
from qs.validation import as_positive_mask

__all__ = ["QueriesResult", "lai_queries"]

#: the losses ``lai_queries`` takes
QUERY_LOSSES = ("ap", "ndcg")
#: calls of at least this many documents (all queries together) run on threads, in blocks of
#: whole queries, as `qs.inference.batch.lai_batch`'s batches do
THREADED_MIN = 1 << 16


class QueriesResult(NamedTuple):
    """Results of `lai_queries`: per document (input order) and per query.

    Attributes
    ----------
    coef : ndarray of shape (n_documents,)
        Of the call's ``coef_dtype``: each query's ``coef(R_bar)`` as in
        `qs.inference.LAIResult` at its documents' places, or with ``gradient=True``
        ``coef(R_bar) - coef(R*)``, the gradient of the query's structured hinge with
        respect to its scores; zero in skipped queries.
    rank : ndarray of shape (n_documents,), int32, or None
        The interleaving rank of each non-relevant document within its query, 0 at the
        relevant ones and in skipped queries; None with ``ranks=False``.
    loss : ndarray of shape (n_queries,), float64
        As in ``LAIResult``; zero in skipped queries.
    objective : ndarray of shape (n_queries,), float64
        As in ``LAIResult``; zero in skipped queries.
    ground_truth_F : ndarray of shape (n_queries,), float64
        As in ``LAIResult``; zero in skipped queries.
    valid : ndarray of shape (n_queries,), bool
        The query has a relevant and a non-relevant document (the others are skipped).
    hinge : ndarray of shape (n_queries,), float64
        The structured hinge ``objective - ground_truth_F`` per query (0 if skipped),
        summed as ``LAIResult.hinge`` is.

    Examples
    --------
    >>> scores = np.array([0.9, 0.8, 0.1, 0.5, 0.3, 0.2])
    >>> result = lai_queries(scores, np.array([1, 0, 1, 0, 1, 0]), np.array([0, 4, 6]))
    >>> result.rank.tolist(), result.loss.tolist()
    ([0, 1, 0, 2, 0, 1], [0.5, 0.5])
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
    record, inc, loss_obj = row_method(loss, method)
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
    if record is None:  # the exhaustive oracle: query by query, for tests on tiny inputs
        _brute_queries(scores, is_pos, offsets, loss, gradient, rank, coef, out, valid)
    else:
        longest = int(np.diff(offsets).max(initial=0))
        loss_rows = row_loss(loss_obj, longest, None)  # a built-in loss: no sizes read

        def block(a, b):
            qq, kk = _queries(
                record,
                inc,
                loss_rows,
                scores,
                is_pos,
                offsets[a : b + 1],
                gradient,
                rank,
                coef,
                out[a:b],
                valid[a:b],
                *work_arrays(longest),
            )
            return (a + qq, kk) if kk >= 0 else None

        if scores.size < THREADED_MIN or n_queries == 1:
            where = block(0, n_queries)
        else:
            bounds = np.searchsorted(offsets, np.linspace(0, scores.size, 2 * thread_count() + 1))
            bounds = np.unique(np.clip(bounds, 0, n_queries))
            bounds[0], bounds[-1] = 0, n_queries
            where = min((w for w in thread_map(block, bounds[:-1], bounds[1:]) if w), default=None)
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


@jit
def _queries(method, inc, loss, scores, is_pos, offsets, gradient, rank, coef, out, valid, *work):
    """Every query ``offsets[q]:offsets[q + 1]`` (of ``scores``, ``is_pos``, and of the
    outputs' ``coef`` and, unless empty, ``rank``) by `solve_row` with the method record
    ``method`` and the loss ``inc``, ``loss``, into ``out[q]`` and ``valid[q]``; ``work``
    the arrays of `work_arrays`, one by one as in `qs.inference._batch_rows.batch_rows`.
    Returns the (query, document within it) of the first non-finite score, (-1, -1) if
    none; the outputs are then not all filled. Every array is read through views without
    an owner (`qs._numba.unowned`): no reference counted per query."""
    scores, is_pos, rank, coef, out, valid = unowned((scores, is_pos, rank, coef, out, valid))
    loss, work = unowned(loss), unowned(work)
    for q in range(offsets.size - 1):
        a, b = offsets[q], offsets[q + 1]
        solved, where = solve_row(
            method,
            inc,
            loss,
            q,
            scores[a:b],
            is_pos[a:b],
            gradient,
            rank[a:b] if rank.size else rank,
            coef[a:b],
            out[q],
            work,
        )
        valid[q] = solved
        if where >= 0:
            return q, where
    return -1, -1


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
