"""Exact LAI by a bucket sort of the negatives, then Algorithm 1's divide and conquer.

For small inputs sorting is cheap and the corner bookkeeping of :mod:`qs.inference.bucket`
is not: here one histogram pass over about one bucket per negative, one pass that moves each
negative (score and ordinal) to its bucket's slot, and a stable sort of each bucket (by
insertion when it is small) give the negatives in descending order, ties in input order,
without a comparison sort of the whole array. The divide and conquer then runs on sorted
scores with no partitioning, and the ranks go back through the ordinals. O(N + B) expected
for scores spread over their range, plus O(N log P) rank evaluations.
"""

import numpy as np

from qs._numba import bind, jit
from qs.inference._core import (
    OK,
    _sort_pairs_descending,
    bucket_of,
    failed,
    finish,
    finish_pairs,
    opt_ranks_sorted,
    positive_steps,
    reference,
)
from qs.inference.bucket import MAX_BUCKETS, scan_histogram

#: buckets larger than this are sorted by merge sort instead of insertion
INSERTION_MAX = 32


@jit
def sort_by_buckets(scores, is_pos, count, low, scale, v, idx):
    """Negatives in descending order into ``v``, their ordinals (places in input order among
    the negatives) into ``idx``; ties keep input order. ``count`` is their histogram over
    the buckets of ``low``/``scale``."""
    top = count.size - 1
    start = np.empty(count.size, dtype=np.int64)
    placed = 0
    for b in range(top, -1, -1):  # the highest bucket first
        start[b] = placed
        placed += count[b]
    fill = start.copy()
    q = 0
    for k in range(scores.size):
        if is_pos[k]:
            continue
        s = scores[k]
        b = bucket_of(s, low, scale, top)
        p = fill[b]
        v[p] = s
        idx[p] = q
        fill[b] = p + 1
        q += 1
    for b in range(count.size):
        n = count[b]
        if n < 2:
            continue
        lo = start[b]
        if n <= INSERTION_MAX:
            _sort_pairs_descending(v, idx, lo, lo + n - 1)
        else:  # stable: ties keep their ordinals' order
            order = np.argsort(-v[lo : lo + n], kind="mergesort")
            v[lo : lo + n] = v[lo : lo + n][order]
            idx[lo : lo + n] = idx[lo : lo + n][order]


@jit
def _bucket_sort(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef):
    """:func:`_bucket_sort_into` with its work arrays allocated here."""
    n_neg = scores.size - n_pos
    return _bucket_sort_into(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef,
                             np.empty(n_neg), np.empty(n_neg, dtype=np.int64),
                             np.empty(n_neg, dtype=np.int64))


@jit
def _bucket_sort_into(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef, v, idx, rk):
    """The method on the caller's work arrays ``v``, ``idx``, ``rk`` of N elements."""
    n_neg = scores.size - n_pos
    ref = reference(scores)
    err, where, sum_pos, sum_neg, pos_sorted, pos_index, low, scale, count, _ = scan_histogram(
        scores, is_pos, n_pos, n_buckets, ref)
    if err != OK:
        return failed(err, where)
    sort_by_buckets(scores, is_pos, count, low, scale, v, idx)
    c2 = 2.0 / (n_pos * n_neg)
    spos = positive_steps(pos_sorted, c2, ref)
    opt_ranks_sorted(v, rk, 0, n_neg - 1, 0, None, 1, n_pos + 1, inc, params, n_pos, c2, spos)
    rank_count, dot = finish_pairs(idx, rk, scores, is_pos, n_pos, n_neg, neg_rank, coef, ref)
    return finish(rank_count, dot, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg, ref)


def bucket_sort_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """Sort the negatives by score buckets, then rank them by divide and conquer; work
    arrays from the :class:`~qs.inference.Workspace` ``ws`` when given."""
    n_neg = neg_rank.size
    params = loss.prepare(n_pos, n_neg)
    n_buckets = int(min(MAX_BUCKETS, max(16, n_neg)))
    if ws is None:
        return bind(_bucket_sort, loss.kernel)(params, scores, is_pos, n_pos, n_buckets, neg_rank,
                                               coef)
    return bind(_bucket_sort_into, loss.kernel)(
        params, scores, is_pos, n_pos, n_buckets, neg_rank, coef, ws.take("v", n_neg, np.float64),
        ws.take("idx", n_neg, np.int64), ws.take("rk", n_neg, np.int64))
