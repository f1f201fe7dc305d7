"""Exact LAI by bucketing negatives on their scores: the default method.

The optimal rank ``r(s, j)`` of a negative is non-increasing in its score ``s`` and
non-decreasing in its place ``j`` (DESIGN.md). One histogram pass puts the negatives in
equal-width score buckets, which gives each bucket its places ``J+1 .. J+c``. A bucket's
members lie between its top corner (its upper edge at place ``J+1``) and its bottom corner
(its lower edge at place ``J+c``); when the two corners get the same rank, every member gets
it, unsorted. Top corners are monotone along the buckets, and so are bottom corners, so the
divide and conquer of Algorithm 1 ranks each sequence. Only the buckets whose corners differ
(about one per rank change, so about P) are gathered and solved by Algorithm 1 within their
own places and rank interval.

No comparison sort of the negatives: O(N + B + P log B) plus Algorithm 1 on the gathered
negatives, for B buckets. The paper's Omega(N log P) lower bound holds for comparison-based
methods only.
"""

import numpy as np

from qs._numba import bind, jit, jit_generic
from qs.inference._core import (
    OK,
    bucket_of,
    canonical_ties,
    failed,
    finish,
    new_stack,
    opt_ranks_sorted,
    opt_ranks_unsorted,
    positive_steps,
    scan_input,
)


@jit
def _corners(count, low, scale, ends):
    """Non-empty buckets in descending score order, their first places, and their corners.

    Inner edges are widened by a few rounding errors so that every member lies within them;
    the outer edges of the end buckets are their recorded extreme members (they also hold
    the scores beyond the range the buckets were laid over).
    """
    n_buckets = count.size
    top = n_buckets - 1
    width = n_buckets / scale if scale > 0.0 else 0.0
    slack = 8.0 * np.finfo(np.float64).eps * (abs(low) + abs(low + width) + width)
    order = top - np.flatnonzero(count[::-1])
    first = np.empty(order.size, dtype=np.int64)
    top_s = np.empty(order.size)
    top_j = np.empty(order.size, dtype=np.int64)
    bottom_s = np.empty(order.size)
    bottom_j = np.empty(order.size, dtype=np.int64)
    placed = 0
    for t in range(order.size):
        b = order[t]
        first[t] = placed
        if b == 0:  # all of them when scale is 0
            top_s[t], bottom_s[t] = ends[1], ends[0]
            if scale > 0.0 and top > 0:
                top_s[t] = min(low + 1.0 / scale + slack, ends[1])
        elif b == top:
            top_s[t] = ends[3]
            bottom_s[t] = max(low + b / scale - slack, ends[2])
        else:
            top_s[t] = low + (b + 1) / scale + slack
            bottom_s[t] = low + b / scale - slack
        top_j[t] = placed + 1
        placed += count[b]
        bottom_j[t] = placed
    return order, first, top_s, top_j, bottom_s, bottom_j


@jit
def _settle_pass(scores, is_pos, low, scale, settled, gather_at, coef_of_rank, n_gather,
                 neg_rank, coef):
    """Input-order pass: negatives of settled buckets get rank and coefficient; the others
    are gathered (score, input index, place among the negatives), bucket by bucket, in
    input order."""
    top = settled.size - 1
    g_score = np.empty(n_gather)
    g_index = np.empty(n_gather, dtype=np.int64)
    g_place = np.empty(n_gather, dtype=np.int64)
    fill = gather_at.copy()
    dot = 0.0
    q = 0
    for k in range(scores.size):
        if is_pos[k]:
            continue
        s = scores[k]
        b = bucket_of(s, low, scale, top)
        r = settled[b]
        if r > 0:
            neg_rank[q] = r
            c = coef_of_rank[r]
            coef[k] = c
            dot += c * s
        else:
            p = fill[b]
            g_score[p], g_index[p], g_place[p] = s, k, q
            fill[b] = p + 1
        q += 1
    return g_score, g_index, g_place, dot


@jit_generic
def _bucket(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef):
    n_neg = scores.size - n_pos
    err, where, sum_pos, sum_neg, pos_sorted, pos_index, ends, low, scale, count = scan_input(
        scores, is_pos, n_pos, n_buckets
    )
    if err != OK:
        return failed(err, where)
    c2 = 2.0 / (n_pos * n_neg)
    spos = positive_steps(pos_sorted, c2)
    order, first, top_s, top_j, bottom_s, bottom_j = _corners(count, low, scale, ends)
    n_full = order.size
    top_r = np.empty(n_full, dtype=np.int64)
    bottom_r = np.empty(n_full, dtype=np.int64)
    opt_ranks_sorted(top_s, top_r, 0, n_full - 1, 0, top_j, 1, n_pos + 1, inc, params, n_pos, c2, spos)
    opt_ranks_sorted(bottom_s, bottom_r, 0, n_full - 1, 0, bottom_j, 1, n_pos + 1, inc, params,
                     n_pos, c2, spos)

    rank_count = np.zeros(n_pos + 2, dtype=np.int64)
    settled = np.zeros(n_buckets, dtype=np.int32)
    gather_at = np.zeros(n_buckets, dtype=np.int64)
    n_gather = 0
    for t in range(n_full):
        b = order[t]
        if top_r[t] == bottom_r[t]:
            settled[b] = top_r[t]
            rank_count[top_r[t]] += count[b]
        else:
            gather_at[b] = n_gather
            n_gather += count[b]
    coef_of_rank = (n_pos + 2 - 2 * np.arange(n_pos + 2)) * (1.0 / (n_pos * n_neg))
    work, g_index, g_place, dot = _settle_pass(
        scores, is_pos, low, scale, settled, gather_at, coef_of_rank, n_gather, neg_rank, coef
    )

    # Algorithm 1 inside each gathered bucket, scores partitioned in place; idx (gather
    # positions, in input order within a bucket) moves along and breaks ties
    idx = np.arange(n_gather)
    rk = np.empty(n_gather, dtype=np.int64)
    stack = new_stack()
    for t in range(n_full):
        b = order[t]
        if settled[b] > 0:
            continue
        lo = gather_at[b]
        hi = lo + count[b] - 1
        opt_ranks_unsorted(work, idx, rk, lo, hi, first[t] - lo, top_r[t], bottom_r[t],
                           inc, params, n_pos, c2, spos, stack)
        canonical_ties(work, idx, rk, lo, hi)
    for p in range(n_gather):
        g = idx[p]
        r = rk[p]
        neg_rank[g_place[g]] = r
        c = coef_of_rank[r]
        coef[g_index[g]] = c
        dot += c * work[p]
        rank_count[r] += 1
    return finish(rank_count, dot, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg)


def n_buckets_for(n_pos, n_neg):
    """About 2 sqrt(N P) buckets, capped so that the counts stay in cache.

    The corners cost O(B + P log B) rank evaluations and the straddling buckets gather about
    P N / B negatives; their sum is smallest for B of order sqrt(N P) (measured: 2 sqrt(N P)
    is best or within a few percent of it from N = 3000 to 10^7).
    """
    return int(min(1 << 16, max(16, 2.0 * (n_pos * n_neg) ** 0.5)))


def bucket_lai(loss, scores, is_pos, n_pos, neg_rank, coef):
    """Ranks of all negatives by score buckets, sorting none of them."""
    params = loss.prepare(n_pos, neg_rank.size)
    n_buckets = n_buckets_for(n_pos, neg_rank.size)
    return bind(_bucket, loss.kernel)(params, scores, is_pos, n_pos, n_buckets, neg_rank, coef)
