"""Exact LAI by a bucket sort of the negatives, then Algorithm 1's divide and conquer.

For small inputs sorting is cheap and the corner bookkeeping of `qs.inference.bucket`
is not: here the pass over the input gathers the negatives (as `qs.inference.qs`
does), one histogram pass over about one bucket per negative, one pass that moves each
negative (score and key) to its bucket's slot, and a stable sort of each bucket (by
insertion when it is small) give the negatives in descending order, ties in input order,
without a comparison sort of the whole array. The divide and conquer then runs on sorted
scores with no partitioning, and the ranks go to their places through the keys. For AP it
stops at place P, past which every negative's objective is concave in its rank: a monotone
sweep ranks the rest in O(N + P) (`opt_ranks_swept`). O(N + B)
expected for scores spread over their range, plus O(N log P) rank evaluations (AP: O(N + P)
past place P). It runs in the kernel it shares with ``qs`` and ``auto``
(`qs.inference.auto`).
"""

from qs._numba import jit, jit_inline
from qs.inference._ranks import opt_ranks_swept
from qs.inference._sorting import MAX_BUCKETS, sort_by_buckets


@jit
def histogram_size(n_neg, n_pos):
    """About one bucket per negative, at most `MAX_BUCKETS`."""
    return min(MAX_BUCKETS, max(16, n_neg))


@jit_inline
def bucket_sort_ranks(inc, params, v, key, rk, n_pos, c2, spos, count, v_sorted, key_sorted):
    """The method on the gathered negatives ``v`` (keys ``key``, input order): sorted by
    buckets into ``v_sorted``, ``key_sorted``, then the rank at each of their positions
    into ``rk``. ``count``: the histogram's scratch, of `histogram_size` elements."""
    sort_by_buckets(v, key, count, v_sorted, key_sorted)
    opt_ranks_swept(v_sorted, rk, inc, params, n_pos, c2, spos)
