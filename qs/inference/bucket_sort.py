"""Exact LAI by a bucket sort of the negatives, then Algorithm 1's divide and conquer.

For small inputs sorting is cheap and the corner bookkeeping of :mod:`qs.inference.bucket`
is not: here the pass over the input gathers the negatives (as :mod:`qs.inference.qs`
does), one histogram pass over about one bucket per negative, one pass that moves each
negative (score and key) to its bucket's slot, and a stable sort of each bucket (by
insertion when it is small) give the negatives in descending order, ties in input order,
without a comparison sort of the whole array. The divide and conquer then runs on sorted
scores with no partitioning, and the ranks go to their places through the keys. O(N + B)
expected for scores spread over their range, plus O(N log P) rank evaluations.
"""

import numpy as np

from qs._numba import bind, jit
from qs.inference._core import (
    OK,
    _sort_pairs_descending,
    bucket_of,
    failed,
    finish,
    new_stack,
    opt_ranks_sorted,
    positive_steps_into,
    rank_pass,
    sort_pairs,
)
from qs.inference.bucket import MAX_BUCKETS
from qs.inference.qs import WORK as QS_WORK
from qs.inference.qs import check_size, gather

#: buckets larger than this are sorted by merge sort instead of insertion
INSERTION_MAX = 32
#: the buckets are laid over the range of this many negatives, strided
RANGE_SAMPLE = 1024


@jit
def histogram_size(n_neg, n_pos):
    """About one bucket per negative, at most :data:`MAX_BUCKETS`."""
    return min(MAX_BUCKETS, max(16, n_neg))


#: the work arrays of :func:`_bucket_sort_into`: those of qs (the gathered negatives) and
#: the sorted negatives, their keys and the histogram
WORK = QS_WORK + (("v_sorted", "N", np.float64), ("key_sorted", "N", np.int64),
                  ("count", histogram_size, np.int64))


@jit
def sort_by_buckets(v, key, count, v_sorted, key_sorted):
    """The gathered negatives ``v`` (keys ``key``, input order) in descending order into
    ``v_sorted``, ``key_sorted``; ties keep input order. ``count``: the histogram's
    scratch (one element per bucket)."""
    n = v.size
    low = np.inf
    high = -np.inf
    for q in range(0, n, max(1, n // RANGE_SAMPLE)):  # scores beyond go to the end buckets
        low = min(low, v[q])
        high = max(high, v[q])
    top = count.size - 1
    scale = count.size / (high - low) if high > low else 0.0
    if not np.isfinite(scale):
        scale = 0.0  # the range overflows: one bucket
    for b in range(count.size):
        count[b] = 0
    for q in range(n):
        count[bucket_of(v[q], low, scale, top)] += 1
    placed = 0
    for b in range(top, -1, -1):  # the highest bucket first; count becomes where each starts
        c = count[b]
        count[b] = placed
        placed += c
    for q in range(n):
        b = bucket_of(v[q], low, scale, top)
        p = count[b]
        v_sorted[p] = v[q]
        key_sorted[p] = key[q]
        count[b] = p + 1  # ends at the next bucket's start
    lo = 0
    for b in range(top, -1, -1):
        hi = count[b]  # the end of bucket b
        m = hi - lo
        if m > INSERTION_MAX:  # ties by key: input order; v, key are scratch now
            sort_pairs(v_sorted[lo:hi], key_sorted[lo:hi], v[lo:hi], key[lo:hi])
        elif m > 1:
            _sort_pairs_descending(v_sorted, key_sorted, lo, hi - 1)
        lo = hi


@jit
def bucket_sort_gathered(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, key, rk,
                         pos_values, pos_index, spos, rank_count, v_sorted, key_sorted, count,
                         sum_pos, sum_neg, ref):
    """The method on the gathered negatives and sorted positives, then the result."""
    n_neg = v.size
    sort_by_buckets(v, key, count, v_sorted, key_sorted)
    c2 = 2.0 / (n_pos * n_neg)
    positive_steps_into(pos_values, c2, ref, spos)
    opt_ranks_sorted(v_sorted, rk, 0, n_neg - 1, 0, None, 1, n_pos + 1, inc, params, n_pos, c2,
                     spos)
    dot = rank_pass(v_sorted, key_sorted, rk, n_pos, scores, is_pos, neg_rank, coef, ref,
                    rank_count)
    return finish(rank_count, dot, pos_values, pos_index, n_neg, coef, sum_pos, sum_neg, ref)


@jit
def new_work(n_pos, n_neg, n_buckets):
    """Fresh work arrays of :data:`WORK`, in its order: for a call without a Workspace."""
    return (np.empty(n_neg), np.empty(n_neg, dtype=np.int64), np.empty(n_neg, dtype=np.int64),
            np.empty(n_pos), np.empty(n_pos, dtype=np.int64), np.empty(n_pos + 1),
            np.empty(n_pos + 2, dtype=np.int64), new_stack(), np.full(n_pos, -1, dtype=np.int64),
            np.empty(n_pos), np.empty(n_pos, dtype=np.int64), np.empty(n_neg),
            np.empty(n_neg, dtype=np.int64), np.empty(n_buckets, dtype=np.int64))


@jit
def _bucket_sort_into(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, key, rk, pos_values,
                      pos_index, spos, rank_count, stack, order, tmp_v, tmp_i, v_sorted,
                      key_sorted, count):
    """The method on the caller's work arrays (:data:`WORK`)."""
    err, where, sum_pos, sum_neg, ref = gather(scores, is_pos, v, key, pos_values, pos_index,
                                               order, tmp_v, tmp_i)
    if err != OK:
        return failed(err, where)
    return bucket_sort_gathered(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, key, rk,
                                pos_values, pos_index, spos, rank_count, v_sorted, key_sorted,
                                count, sum_pos, sum_neg, ref)


@jit
def _bucket_sort(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef):
    """:func:`_bucket_sort_into` with its work arrays allocated here."""
    n_neg = scores.size - n_pos
    return _bucket_sort_into(inc, params, scores, is_pos, n_pos, neg_rank, coef,
                             *new_work(n_pos, n_neg, n_buckets))


def bucket_sort_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """Sort the negatives by score buckets, then rank them by divide and conquer; work
    arrays from the :class:`~qs.inference.Workspace` ``ws`` when given."""
    check_size(scores)
    params = loss.prepare(n_pos, neg_rank.size)
    if ws is None:  # allocated inside the kernel: faster than a Workspace's arrays
        return bind(_bucket_sort, loss.kernel)(params, scores, is_pos, n_pos,
                                               histogram_size(neg_rank.size, n_pos), neg_rank,
                                               coef)
    return bind(_bucket_sort_into, loss.kernel)(params, scores, is_pos, n_pos, neg_rank, coef,
                                                *ws.arrays(WORK, neg_rank.size, n_pos))
