"""Exact LAI by bucketing negatives on their scores: the default for large inputs.

The optimal rank ``r(s, j)`` of a negative is non-increasing in its score ``s`` and
non-decreasing in its place ``j`` (DESIGN.md). One histogram pass puts the negatives in
equal-width score buckets and gives each bucket its places ``J+1 .. J+c``. A bucket's members
all lie between its top corner (its largest score at place ``J+1``) and its bottom corner
(its smallest score at place ``J+c``); when the two corners get the same rank, every member
gets it, unsorted. The corners' ranks are monotone along the buckets, so the divide and
conquer of Algorithm 1 finds them all. Only the few buckets whose corners differ (at most
one per rank change, so at most P) are gathered and solved by Algorithm 1 within their own
place offset and rank interval.

No comparison sort of the negatives: O(N + B + P log B) plus Algorithm 1 on the gathered
negatives, where B is the number of buckets. The paper's Omega(N log P) lower bound holds
for comparison-based methods only.
"""

import numpy as np

from qs._numba import bind, jit_generic
from qs.inference._core import (
    canonical_ties,
    opt_ranks_sorted,
    opt_ranks_unsorted,
    positive_steps,
)


@jit_generic
def _bucket_ranks(inc, params, neg_min, neg_max, n_buckets, scores, is_pos, n_pos, n_neg,
                  pos_sorted):
    n = scores.size
    c2 = 2.0 / (n_pos * n_neg)
    spos = positive_steps(pos_sorted, c2)
    neg_rank = np.empty(n_neg, dtype=np.int64)
    coef = np.empty(n)
    rank_count = np.zeros(n_pos + 2, dtype=np.int64)
    width = neg_max - neg_min
    scale = 0.0
    if width > 0.0:
        scale = n_buckets / width
        if not np.isfinite(scale):
            scale = 0.0
    top = n_buckets - 1

    # 1. histogram: count, smallest and largest score per bucket
    count = np.zeros(n_buckets, dtype=np.int64)
    b_min = np.full(n_buckets, np.inf)
    b_max = np.full(n_buckets, -np.inf)
    for k in range(n):
        if is_pos[k]:
            continue
        s = scores[k]
        b = min(int((s - neg_min) * scale), top)
        count[b] += 1
        if s < b_min[b]:
            b_min[b] = s
        if s > b_max[b]:
            b_max[b] = s

    # 2. corners of the non-empty buckets, in descending score order, and their ranks
    n_full = 0
    for b in range(n_buckets):
        n_full += count[b] > 0
    order = np.empty(n_full, dtype=np.int64)
    corner_s = np.empty(2 * n_full)
    corner_j = np.empty(2 * n_full, dtype=np.int64)
    offset = np.empty(n_buckets, dtype=np.int64)
    t = 0
    placed = 0
    for b in range(top, -1, -1):
        c = count[b]
        if c == 0:
            continue
        order[t] = b
        offset[b] = placed
        corner_s[2 * t], corner_j[2 * t] = b_max[b], placed + 1
        corner_s[2 * t + 1], corner_j[2 * t + 1] = b_min[b], placed + c
        placed += c
        t += 1
    corner_r = np.empty(2 * n_full, dtype=np.int64)
    opt_ranks_sorted(corner_s, corner_r, 0, 2 * n_full - 1, 0, corner_j, 1, n_pos + 1,
                     inc, params, n_pos, c2, spos)

    # 3. settled buckets take their rank; the others get a slice of the gather buffer
    settled = np.zeros(n_buckets, dtype=np.int64)
    gather_at = np.zeros(n_buckets, dtype=np.int64)
    n_gather = 0
    for t in range(n_full):
        b = order[t]
        r_top, r_bottom = corner_r[2 * t], corner_r[2 * t + 1]
        if r_top == r_bottom:
            settled[b] = r_top
            rank_count[r_top] += count[b]
        else:
            gather_at[b] = n_gather
            n_gather += count[b]

    # 4. one pass in input order: settled negatives are done, the others are gathered
    inv = 1.0 / (n_pos * n_neg)
    coef_of_rank = np.empty(n_pos + 2)
    for r in range(n_pos + 2):
        coef_of_rank[r] = (n_pos + 2 - 2 * r) * inv
    g_score = np.empty(n_gather)
    g_index = np.empty(n_gather, dtype=np.int64)
    g_place = np.empty(n_gather, dtype=np.int64)
    fill = gather_at.copy()
    dot = 0.0
    q = 0
    for k in range(n):
        if is_pos[k]:
            continue
        s = scores[k]
        b = min(int((s - neg_min) * scale), top)
        r = settled[b]
        if r > 0:
            neg_rank[q] = r
            cf = coef_of_rank[r]
            coef[k] = cf
            dot += cf * s
        else:
            p = fill[b]
            g_score[p], g_index[p], g_place[p] = s, k, q
            fill[b] = p + 1
        q += 1
    if n_gather == 0:
        return neg_rank, coef, rank_count, dot

    # 5. Algorithm 1 inside each gathered bucket; gathered order is input order per bucket
    work = g_score.copy()
    idx = np.arange(n_gather)
    rk = np.empty(n_gather, dtype=np.int64)
    for t in range(n_full):
        b = order[t]
        if settled[b] > 0:
            continue
        lo = gather_at[b]
        hi = lo + count[b] - 1
        opt_ranks_unsorted(work, idx, rk, lo, hi, offset[b] - lo, corner_r[2 * t],
                           corner_r[2 * t + 1], inc, params, n_pos, c2, spos)
        canonical_ties(work, idx, rk, lo, hi)
    for p in range(n_gather):
        g = idx[p]
        r = rk[p]
        neg_rank[g_place[g]] = r
        cf = coef_of_rank[r]
        coef[g_index[g]] = cf
        dot += cf * g_score[g]
        rank_count[r] += 1
    return neg_rank, coef, rank_count, dot


def n_buckets_for(n_neg, n_pos):
    """Enough buckets that the ones straddling a rank change hold few negatives, few enough
    that the histogram stays in cache."""
    return int(min(1 << 16, max(16, n_neg // 4, 64 * (n_pos + 1))))


def bucket_ranks(ctx):
    """Ranks of all negatives by score buckets, sorting none of them."""
    n_buckets = n_buckets_for(ctx.n_neg, ctx.n_pos)
    return bind(_bucket_ranks, ctx.kernel)(ctx.params, ctx.neg_min, ctx.neg_max, n_buckets,
                                           *ctx.data)
