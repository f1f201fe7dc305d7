"""Exact LAI by a bucket sort of the negatives, then Algorithm 1's divide and conquer.

For small inputs sorting is cheap and the corner bookkeeping of :mod:`qs.inference.bucket`
is not: here the pass over the input gathers the negatives (as :mod:`qs.inference.qs`
does), one histogram pass over about one bucket per negative, one pass that moves each
negative (score and key) to its bucket's slot, and a stable sort of each bucket (by
insertion when it is small) give the negatives in descending order, ties in input order,
without a comparison sort of the whole array. The divide and conquer then runs on sorted
scores with no partitioning, and the ranks go to their places through the keys. O(N + B)
expected for scores spread over their range, plus O(N log P) rank evaluations. It runs in the
kernel it shares with ``qs`` and ``auto`` (:mod:`qs.inference.auto`).
"""

import numpy as np

from qs._numba import jit, jit_inline
from qs.inference._core import (
    _sort_pairs_descending,
    bucket_of,
    opt_ranks_sorted,
    sort_pairs,
)
from qs.inference.bucket import MAX_BUCKETS

#: buckets larger than this are sorted by merge sort instead of insertion
INSERTION_MAX = 32
#: the buckets are laid over the range of this many negatives, strided
RANGE_SAMPLE = 1024


@jit
def histogram_size(n_neg, n_pos):
    """About one bucket per negative, at most :data:`MAX_BUCKETS`."""
    return min(MAX_BUCKETS, max(16, n_neg))


@jit_inline
def sort_by_buckets(v, key, count, v_sorted, key_sorted):
    """The gathered negatives ``v`` (keys ``key``, input order) in descending order into
    ``v_sorted``, ``key_sorted``; ties keep input order. ``count``: the histogram's
    scratch (one element per bucket); ``v`` and ``key`` are scratch once read."""
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
        if m > INSERTION_MAX:  # ties by key: input order
            sort_pairs(v_sorted[lo:hi], key_sorted[lo:hi], v[lo:hi], key[lo:hi])
        elif m > 1:
            _sort_pairs_descending(v_sorted, key_sorted, lo, hi - 1)
        lo = hi


@jit_inline
def bucket_sort_ranks(inc, params, v, key, rk, n_pos, c2, spos, count, v_sorted, key_sorted):
    """The method on the gathered negatives ``v`` (keys ``key``, input order): sorted by
    buckets into ``v_sorted``, ``key_sorted``, then the rank at each of their positions
    into ``rk``. ``count``: the histogram's scratch, of :func:`histogram_size` elements."""
    sort_by_buckets(v, key, count, v_sorted, key_sorted)
    opt_ranks_sorted(v_sorted, rk, 0, v.size - 1, 0, None, 1, n_pos + 1, inc, params, n_pos, c2,
                     spos)
