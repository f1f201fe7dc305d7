"""The default method: ``bucket``, ``bucket_sort`` or ``qs``, chosen by what the input is.

The rule (`sorts`), reading N and P:

- Many negatives, and many per positive, at least ``max(SORT_BELOW, SORT_PER_POSITIVE *
  P)`` (a share of positives P/N up to 1/24), and at most ``BUCKET_MAX_POSITIVES``
  positives: ``bucket``, which settles whole buckets of negatives unsorted (its corner
  work is small beside N).
- Fewer, or more positives: the ranks change up to P times among the N negatives, so that
  nearly every bucket would straddle a change and be gathered (``bucket`` has at most
  2^16 buckets, so that from about half as many positives most of them straddle, at any
  N); sorting all the negatives
  by buckets (coarse ones first from 2^17 of them), the positives too, and AP's sweep past
  place P cost less. The kernel that ``qs`` and ``bucket_sort`` run too (`gathered_lai`, one
  compiled kernel for the three) gathers the negatives (split around a pivot in the same
  pass, as ``qs`` does), the first step of both methods, then
  reads the share of negatives at or below the lowest positive on a sample of the gathered
  ones (in cache, so the choice costs little) and goes on with the code of one of
  them: the default's call costs what that method's call costs. Below
  ``SETTLED_SHARE`` (spread among the positives, as random scores): ``bucket_sort``, which
  sorts them and the positives by buckets, or from ``NUMPY_SORT_FROM`` negatives hands both
  back to be sorted by numpy (``AUTO_NUMPY``: `qs.inference._packed_sort`, then
  `sorted_lai` ranks them as ``bucket_sort`` does), whose vectorised sort numba cannot
  call. Otherwise (mostly below
  every positive, or tied), or with few positives (at least ``QS_PER_POSITIVE`` negatives
  per positive: few ranks, which ``qs``'s splits separate in a few levels): ``qs``, for
  every loss. Inside training most negatives fall below every positive after a few
  iterations, and all scores tie at the first (the weights are zero): their ranks collapse to P + 1 in a
  few splits, and sorting them is wasted.

The thresholds were set by measurement: docs/inference_design.md, "Why auto chooses".
"""

import functools

import numpy as np

from qs._numba import bind, jit, jit_inline
from qs.inference._input import (
    OK,
    failed,
    input_pivot,
    reference,
    scan_gather,
    scan_gather_split,
    unsplit,
)
from qs.inference._output import finish, rank_pass
from qs.inference._packed_sort import packed_sort, unpack_sorted
from qs.inference._prepare import check_size
from qs.inference._ranks import STACK_SHAPE, STACK_SIZE, opt_ranks_swept, positive_steps_into
from qs.inference._sorting import MAX_BUCKETS, sort_positives_hinted
from qs.inference.bucket import bucket_lai
from qs.inference.bucket_sort import bucket_sort_ranks, histogram_size
from qs.inference.qs import qs_ranks
from qs.inference.workspace import Workspace
from qs.losses import QSLoss

SORT_BELOW = 8192
SORT_PER_POSITIVE = 24
BUCKET_MAX_POSITIVES = MAX_BUCKETS // 2
SETTLED_SHARE = 0.5
QS_PER_POSITIVE = 64


@jit
def sorts(n_neg, n_pos):
    """Whether the default sorts (`gathered_lai`) rather than running ``bucket``: the
    size rule above, which reads P as well as N."""
    return n_neg < SORT_BELOW or n_neg < SORT_PER_POSITIVE * n_pos or n_pos > BUCKET_MAX_POSITIVES


#: how many of the gathered negatives `settled_share` reads (strided): enough to tell
#: a share above one half (training, ties) from one near 0 (random scores)
SHARE_SAMPLE = 16


@jit_inline
def settled_share(v, lowest):
    """The share of the negatives ``v`` that score at most ``lowest`` (the lowest positive),
    on a strided sample of `SHARE_SAMPLE` of them. Read from the gathered negatives,
    which are in cache (read from the input before the pass over it, the same sample missed
    the cache at each run of samples)."""
    step = max(1, v.size // SHARE_SAMPLE)
    settled = 0
    total = 0
    for k in range(0, v.size, step):
        settled += v[k] <= lowest
        total += 1
    return settled / total


#: what `gathered_lai` runs: the choice above (``AUTO``), or one method forced; ``AUTO_NUMPY``:
#: the choice, with the negatives that ``bucket_sort`` would sort handed back to be sorted by
#: numpy (`qs.inference._packed_sort`)
AUTO, QS, BUCKET_SORT, AUTO_NUMPY = 0, 1, 2, 3
#: from this many negatives the default sorts them by numpy (``AUTO_NUMPY``)
NUMPY_SORT_FROM = 1 << 15
#: the error code of a `gathered_lai` result that asks for that sort
SORT_NEEDED = -1


@jit
def work_floats(n_neg, n_pos):
    """Size of the float64 work buffer of `gathered_lai`."""
    return 2 * n_neg + 3 * n_pos + 1


@jit
def work_ints(n_neg, n_pos):
    """Size of the int64 work buffer of `gathered_lai`."""
    return 3 * n_neg + 4 * n_pos + 2 + STACK_SIZE + histogram_size(n_neg, n_pos)


#: the work arrays of `gathered_lai` as two buffers, one per dtype: a kernel call from
#: Python pays to unbox each array argument
PACKED = (("floats", work_floats, np.float64), ("ints", work_ints, np.int64))
#: the buffers of a call without a workspace: too short, so the kernel allocates its own
NO_FLOATS, NO_INTS = np.empty(0), np.empty(0, dtype=np.int64)


@jit
def gathered_lai(inc, params, route, scores, is_pos, n_pos, neg_rank, coef, floats, ints):
    """``qs``, ``bucket_sort`` or (``route`` AUTO) the one the share of settled negatives
    picks: one kernel for the three, so that the default runs the code ``qs`` runs.

    The pass over the input gathers the positives and the negatives (split around a pivot
    taken from the input for ``qs``: its first partition, free in that pass), then the
    positives are sorted from the order the last call of the same sizes left in ``ints``
    (on the ``AUTO_NUMPY`` route's sorting branch, numpy sorts them after the call).
    Work arrays are cut from ``floats`` and ``ints`` (`PACKED`), allocated here when
    shorter."""
    n_neg = neg_rank.size
    if floats.size < work_floats(n_neg, n_pos):
        floats = np.empty(work_floats(n_neg, n_pos))
    if ints.size < work_ints(n_neg, n_pos):
        ints = np.empty(work_ints(n_neg, n_pos), dtype=np.int64)
    n, p = n_neg, n_pos
    v, v_sorted, pos_values = floats[:n], floats[n : 2 * n], floats[2 * n : 2 * n + p]
    spos = floats[2 * n + p : 2 * n + 2 * p + 1]
    tmp_v = floats[2 * n + 2 * p + 1 : 2 * n + 3 * p + 1]
    key, rk, key_sorted = ints[:n], ints[n : 2 * n], ints[2 * n : 3 * n]
    pos_index, order = ints[3 * n : 3 * n + p], ints[3 * n + p : 3 * n + 2 * p]
    tmp_i, rank_count = ints[3 * n + 2 * p : 3 * n + 3 * p], ints[3 * n + 3 * p : 3 * n + 4 * p + 2]
    end = 3 * n + 4 * p + 2 + STACK_SIZE
    stack = ints[end - STACK_SIZE : end].reshape(STACK_SHAPE)
    count = ints[end : end + histogram_size(n, p)]
    ref = reference(scores)
    pivot = 0.0
    above = 0
    if route == BUCKET_SORT:
        err, where, sum_pos, sum_neg = scan_gather(
            scores, is_pos, ref, pos_values, pos_index, v, key
        )
    else:
        pivot = input_pivot(scores)
        err, where, sum_pos, sum_neg, above = scan_gather_split(
            scores, is_pos, ref, pivot, pos_values, pos_index, v, key
        )
    if err != OK:
        return failed(err, where)
    use_qs = route == QS or (
        route != BUCKET_SORT
        and (n >= QS_PER_POSITIVE * p or settled_share(v, pos_values.min()) >= SETTLED_SHARE)
    )
    if not use_qs and route != BUCKET_SORT:
        unsplit(v, key, above)  # the stable sorts need ties in input order
        if route == AUTO_NUMPY:  # numpy sorts the positives too (`sorted_lai`)
            return SORT_NEEDED, -1, sum_pos, sum_neg, np.empty(0, dtype=np.int64), ref
    sort_positives_hinted(pos_values, pos_index, order, tmp_v, tmp_i, count)
    c2 = positive_steps_into(pos_values, n_neg, ref, spos)
    if use_qs:
        qs_ranks(inc, params, v, key, rk, n_pos, c2, spos, stack, pivot, above)
    else:
        bucket_sort_ranks(inc, params, v, key, rk, n_pos, c2, spos, count, v_sorted, key_sorted)
        v, key = v_sorted, key_sorted
    total, comp = rank_pass(v, key, rk, n_pos, scores, is_pos, neg_rank, coef, ref, rank_count)
    return finish(
        rank_count, total, comp, pos_values, pos_index, n_neg, coef, sum_pos, sum_neg, ref
    )


@jit
def sorted_lai(
    inc,
    params,
    keys,
    n_bits,
    pos_keys,
    pos_bits,
    scores,
    is_pos,
    n_pos,
    neg_rank,
    coef,
    floats,
    ints,
    sums,
):
    """The rest of ``bucket_sort`` after `gathered_lai` returned `SORT_NEEDED`: the gathered
    negatives and positives in the order of their sorted keys ``keys`` and ``pos_keys``
    (`qs.inference._packed_sort`), the negatives' ranks, and the result, from the work
    arrays that `gathered_lai` left. The positives' arrangement is left in the work arrays
    as `sort_positives_hinted` leaves it, for the next call's hint."""
    n, p = neg_rank.size, n_pos
    v, v_sorted, pos_values = floats[:n], floats[n : 2 * n], floats[2 * n : 2 * n + p]
    spos = floats[2 * n + p : 2 * n + 2 * p + 1]
    tmp_v = floats[2 * n + 2 * p + 1 : 2 * n + 3 * p + 1]
    key, rk, key_sorted = ints[:n], ints[n : 2 * n], ints[2 * n : 3 * n]
    pos_index, order = ints[3 * n : 3 * n + p], ints[3 * n + p : 3 * n + 2 * p]
    tmp_i, rank_count = ints[3 * n + 2 * p : 3 * n + 3 * p], ints[3 * n + 3 * p : 3 * n + 4 * p + 2]
    for t in range(p):
        order[t] = t
    unpack_sorted(pos_keys, pos_bits, pos_values, order, tmp_v, tmp_i)
    for t in range(p):  # as sort_positives_hinted leaves them
        pos_values[t] = tmp_v[t]
        order[t] = tmp_i[t]
        tmp_i[t] = pos_index[order[t]]
    pos_index[:] = tmp_i
    unpack_sorted(keys, n_bits, v, key, v_sorted, key_sorted)
    c2 = positive_steps_into(pos_values, n, sums[2], spos)
    opt_ranks_swept(v_sorted, rk, inc, params, n_pos, c2, spos)
    total, comp = rank_pass(
        v_sorted, key_sorted, rk, n_pos, scores, is_pos, neg_rank, coef, sums[2], rank_count
    )
    sum_pos, sum_neg, ref = sums
    return finish(rank_count, total, comp, pos_values, pos_index, n, coef, sum_pos, sum_neg, ref)


def run_gathered(
    route: int,
    loss: QSLoss,
    scores: np.ndarray,
    is_pos: np.ndarray,
    n_pos: int,
    neg_rank: np.ndarray,
    coef: np.ndarray,
    ws: Workspace | None = None,
) -> tuple[int, int, float, float, np.ndarray, float]:
    """`gathered_lai` with the loss's increment, and the work arrays of the `Workspace` ``ws``
    when given: ``qs`` (``route`` `QS`), ``bucket_sort`` (`BUCKET_SORT`) or the default's
    choice between them (`AUTO`; `AUTO_NUMPY`: the sort that ``bucket_sort`` would make done
    by ``np.sort`` of packed keys, then `sorted_lai`).

    Parameters
    ----------
    route : int
        `QS`, `BUCKET_SORT`, `AUTO` or `AUTO_NUMPY`.
    loss : QSLoss
        The loss (its increment kernel and its ``prepare``).
    scores : ndarray of float64, shape (n,)
        The scores.
    is_pos : ndarray of uint8, shape (n,)
        1 at the positives, 0 at the negatives.
    n_pos : int
        The number of positives, at least 1 and less than n.
    neg_rank : ndarray of int32, shape (n - n_pos,)
        Written: the interleaving rank of each negative, in input order.
    coef : ndarray of float64, shape (n,)
        Written: the coefficients of the joint feature map.
    ws : Workspace, optional
        Work arrays reused from call to call (`qs.inference.Workspace`).

    Returns
    -------
    tuple
        (error code, the index of a non-finite score or -1, the sums of the positives' and
        the negatives' scores less the reference score, the negatives above each positive
        (int64), the hinge's score term ``F(R_bar) - F(R*)``), as `qs.inference.lai` reads
        them.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.inference.auto import QS, run_gathered
    >>> from qs.losses import get_loss
    >>> scores, is_pos = np.array([2.0, 1.0, 0.5, -1.0]), np.array([1, 0, 1, 0], dtype=np.uint8)
    >>> neg_rank, coef = np.empty(2, dtype=np.int32), np.empty(4)
    >>> err, where, *_ = run_gathered(QS, get_loss("ap"), scores, is_pos, 2, neg_rank, coef)
    >>> neg_rank.tolist()
    [2, 3]
    """
    check_size(scores)
    n_neg = neg_rank.size
    params = loss.prepare(n_pos, n_neg)
    floats, ints = NO_FLOATS, NO_INTS
    if ws is not None:
        floats, ints = ws.arrays(PACKED, n_neg, n_pos)
    elif route == AUTO_NUMPY:  # the work arrays must outlive the kernel
        floats = np.empty(work_floats(n_neg, n_pos))
        ints = np.empty(work_ints(n_neg, n_pos), dtype=np.int64)
    result = bind(gathered_lai, loss.kernel)(
        params, route, scores, is_pos, n_pos, neg_rank, coef, floats, ints
    )
    if result[0] != SORT_NEEDED:
        return result
    keys, n_bits = packed_sort(floats[:n_neg])
    pos_keys, pos_bits = packed_sort(floats[2 * n_neg : 2 * n_neg + n_pos])
    return bind(sorted_lai, loss.kernel)(
        params,
        keys,
        n_bits,
        pos_keys,
        pos_bits,
        scores,
        is_pos,
        n_pos,
        neg_rank,
        coef,
        floats,
        ints,
        (result[2], result[3], result[5]),
    )


def auto_lai(
    loss: QSLoss,
    scores: np.ndarray,
    is_pos: np.ndarray,
    n_pos: int,
    neg_rank: np.ndarray,
    coef: np.ndarray,
    ws: Workspace | None = None,
) -> tuple[int, int, float, float, np.ndarray, float]:
    """The method the rule above (`sorts`) picks for this input, run.

    Parameters
    ----------
    loss : QSLoss
        The loss (its increment kernel and its ``prepare``).
    scores : ndarray of float64, shape (n,)
        The scores.
    is_pos : ndarray of uint8, shape (n,)
        1 at the positives, 0 at the negatives.
    n_pos : int
        The number of positives, at least 1 and less than n.
    neg_rank : ndarray of int32, shape (n - n_pos,)
        Written: the interleaving rank of each negative, in input order.
    coef : ndarray of float64, shape (n,)
        Written: the coefficients of the joint feature map.
    ws : Workspace, optional
        Work arrays reused from call to call (`qs.inference.Workspace`).

    Returns
    -------
    tuple
        (error code, the index of a non-finite score or -1, the sums of the positives' and
        the negatives' scores less the reference score, the negatives above each positive
        (int64), the hinge's score term ``F(R_bar) - F(R*)``), as `qs.inference.lai` reads
        them.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.inference.auto import auto_lai
    >>> from qs.losses import get_loss
    >>> scores, is_pos = np.array([2.0, 1.0, 0.5, -1.0]), np.array([1, 0, 1, 0], dtype=np.uint8)
    >>> neg_rank, coef = np.empty(2, dtype=np.int32), np.empty(4)
    >>> err, where, *_ = auto_lai(get_loss("ap"), scores, is_pos, 2, neg_rank, coef)
    >>> neg_rank.tolist()
    [2, 3]
    """
    if not sorts(neg_rank.size, n_pos):
        return bucket_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws)
    route = AUTO_NUMPY if neg_rank.size >= NUMPY_SORT_FROM else AUTO
    return run_gathered(route, loss, scores, is_pos, n_pos, neg_rank, coef, ws)


#: ``qs`` (`qs.inference.qs`) and ``bucket_sort`` (`qs.inference.bucket_sort`), as
#: `qs.inference.lai` runs them
qs_lai = functools.partial(run_gathered, QS)
bucket_sort_lai = functools.partial(run_gathered, BUCKET_SORT)
