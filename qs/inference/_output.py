"""From the ranks found on a working array of negatives to the result: the ranks given back
to the negatives in input order, their coefficients, the positives' coefficients and F.

Ties among negatives: the one earlier in the input takes the smaller place ``j`` (so a rank
no larger). Ranks go back to the negatives in one of two ways. ``qs`` and ``bucket`` move
each negative's index along with its score and apply the rule with `canonical_ties`.
The methods that sort scores alone with ``np.sort`` (faster than sorting indices) summarise
the sorted scores as rank segments (`rank_entries`) and give each negative, in input
order, the rank of its score (`assign_by_value`), applying the rule where tied scores
straddle a rank change.
"""

import numpy as np

from qs._numba import ONE, jit, jit_inline
from qs.inference._hinge import add, score_term
from qs.inference._input import KEY_LOW, OK
from qs.inference._sorting import bucket_of, sort_pairs


@jit_inline
def _has_straddling_tie(v, rk, lo, hi):
    """Whether some score appears on both sides of a rank change (no allocation)."""
    k = lo
    seg_min = v[lo]
    while k <= hi:
        r = rk[k]
        seg_min = v[k]
        while k <= hi and rk[k] == r:
            seg_min = min(seg_min, v[k])
            k += 1
        if k > hi:
            return False
        r2 = rk[k]
        t = k
        while t <= hi and rk[t] == r2:
            if v[t] == seg_min:
                return True
            t += 1
    return False


@jit
def canonical_ties(v, idx, rk, lo, hi):
    """Where equal scores straddle a rank change in ``v[lo..hi]`` (ranks ``rk``
    non-decreasing), hand their ranks out in increasing order of ``idx``: among tied
    negatives the one earlier in the input gets the smaller rank."""
    if rk[lo] == rk[hi] or not _has_straddling_tie(v, rk, lo, hi):
        return
    n = rk[hi] - rk[lo] + 1  # segments at most
    starts = np.empty(n + 1, dtype=np.int64)
    mins = np.empty(n)
    maxs = np.empty(n)
    n_seg = 0
    k = lo
    while k <= hi:
        r = rk[k]
        starts[n_seg] = k
        mn = v[k]
        mx = v[k]
        while k <= hi and rk[k] == r:
            mn = min(mn, v[k])
            mx = max(mx, v[k])
            k += 1
        mins[n_seg], maxs[n_seg] = mn, mx
        n_seg += 1
    starts[n_seg] = hi + 1
    s = 0
    while s < n_seg - 1:
        t = mins[s]
        if maxs[s + 1] != t:
            s += 1
            continue
        last = s + 1  # the chain of segments holding t: s .. last
        while last + 1 < n_seg and mins[last] == t and maxs[last + 1] == t:
            last += 1
        a, b = starts[s], starts[last + 1]
        m = 0
        for k in range(a, b):
            m += v[k] == t
        tied = np.empty(m)
        owners = np.empty(m, dtype=np.int64)
        q = 0
        for k in range(a, b):
            if v[k] == t:
                tied[q], owners[q] = t, idx[k]
                q += 1
        # their ranks already increase along v: the owners go there in increasing order
        sort_pairs(tied, owners, np.empty(m), np.empty(m, dtype=np.int64))
        q = 0
        for k in range(a, b):
            if v[k] == t:
                idx[k] = owners[q]
                q += 1
        s = last


@jit_inline
def rank_entries(v, rk, lo, hi, out_rank, out_lo, out_hi, out_eq_lo, out_eq_hi, e):
    """Summarise ``v[lo..hi]`` (ranks ``rk`` non-decreasing) as rank segments from entry ``e``.

    Each segment records its rank, smallest and largest score, and how many of its scores
    equal each of those two (for ties that straddle a rank change). Returns the next entry.
    """
    k = lo
    while k <= hi:
        r = rk[k]
        a = k
        mn = v[k]
        mx = v[k]
        while k <= hi and rk[k] == r:
            x = v[k]
            if x < mn:
                mn = x
            if x > mx:
                mx = x
            k += 1
        n_lo = 0
        n_hi = 0
        for t in range(a, k):
            n_lo += v[t] == mn
            n_hi += v[t] == mx
        out_rank[e], out_lo[e], out_hi[e] = r, mn, mx
        out_eq_lo[e], out_eq_hi[e] = n_lo, n_hi
        e += 1
    return e


@jit_inline
def _entry_bins(ent_lo, n_ent):
    """A table to find a score's rank segment in O(1): bins laid over the range of the
    segments' smallest scores ``ent_lo[0] >= ... >= ent_lo[n_ent-1]``.

    ``bin(s) = floor((top - s) * scale)`` clamped to ``0..last`` (`bucket_of` of
    ``-s``) is monotone in ``s`` (in floating point too), so every segment before
    ``start[t]`` (the first whose smallest score falls in a bin
    ``>= t``) has a smallest score above every ``s`` of bin ``t``, and segment ``start[t+1]``
    has one below it: the segment of ``s`` lies in ``start[t] .. start[t+1]``. Returns
    (start, top, scale, last).
    """
    top = ent_lo[0]
    span = top - ent_lo[n_ent - 1]
    n_bins = 2 * n_ent
    scale = n_bins / span if span > 0.0 else 0.0
    if not (scale > 0.0 and np.isfinite(span) and np.isfinite(scale)):
        n_bins, scale = 1, 0.0  # one bin: a plain binary search
    last = n_bins - 1
    start = np.empty(n_bins + 1, dtype=np.int64)
    e = 0
    for t in range(n_bins):
        while bucket_of(-ent_lo[e], -top, scale, last) < np.uintp(t):
            e += 1
        start[t] = e
    start[n_bins] = n_ent - 1
    return start, top, scale, last


@jit_inline
def assign_by_value(scores, is_pos, ent_rank, ent_lo, ent_hi, left_lo, left_hi, neg_rank):
    """Give each negative, in input order, the rank of the rank segment (see
    `rank_entries`; descending) that holds its score.

    A score shared by several segments (a tie that straddles a rank change) hands out that
    score's ranks in increasing order, consuming the per-segment counts ``left_lo`` /
    ``left_hi``; ``cursor[e]`` tracks progress along the chain of segments that starts at
    ``e``. Written as one loop: a call per negative would cost more than the lookup.
    """
    n = ent_lo.size
    start, top, scale, last = _entry_bins(ent_lo, n)
    cursor = np.empty(n, dtype=np.int64)
    for e in range(n):
        cursor[e] = e
    q = np.uintp(0)
    for k in range(scores.size):
        if is_pos[k]:
            continue
        s = scores[k]
        t = bucket_of(-s, -top, scale, last)
        a = start[t]
        b = start[t + ONE]
        while a < b:  # first segment whose smallest score is <= s
            m = (a + b) >> 1
            if ent_lo[m] <= s:
                b = m
            else:
                a = m + 1
        e = a
        if s != ent_lo[e] or e + 1 >= n or ent_hi[e + 1] != s:
            neg_rank[q] = ent_rank[e]
        else:
            c = cursor[e]
            if c == e:
                left_lo[e] -= 1
                if left_lo[e] == 0:
                    cursor[e] = e + 1
            else:
                left_hi[c] -= 1
                if left_hi[c] == 0:
                    cursor[e] = c + 1
            neg_rank[q] = ent_rank[c]
        q += ONE


@jit_inline
def rank_pass(v, key, rk, n_pos, scores, is_pos, neg_rank, coef, ref, rank_count):
    """Ranks of the negatives from a working array (scores ``v``, keys ``key`` as
    `scan_gather` writes them, ranks ``rk``), written straight to their places, and the
    negatives per rank into ``rank_count`` (P + 2 elements, zeroed here); then, in input order,
    their coefficients and the compensated sum of ``(w / (P N)) (score - ref)`` over them
    (`qs.inference._hinge`: ``w = P + 1 - rank``), in input order as every method sums
    it (so that their hinges agree to the last bit, and the solvers' iterates with them).
    Returns (total, compensation). Only the int32 ranks are scattered: scattering the
    float64 coefficients too took twice the time from 10^6 negatives on, where the writes
    miss the cache. The pass in input order has no branch on the labels, which
    mispredicted at each positive: it writes a coefficient at every sample, the positives'
    overwritten by `finish`.
    """
    n_neg = v.size
    for r in range(rank_count.size):
        rank_count[r] = 0
    for p in range(np.uintp(n_neg)):
        r = rk[p]
        neg_rank[np.uintp(key[p] & KEY_LOW)] = r
        rank_count[np.uintp(r)] += 1
    inv = 1.0 / (n_pos * n_neg)
    total = 0.0
    comp = 0.0
    q = np.uintp(0)
    last = np.uintp(n_neg - 1)
    for k in range(np.uintp(scores.size)):
        pos = is_pos[k] != 0
        r = neg_rank[min(q, last)]
        coef[k] = (n_pos + 2 - 2 * r) * inv
        total, comp = add(total, comp, 0.0 if pos else (n_pos + 1 - r) * inv * (scores[k] - ref))
        q += ONE - np.uintp(pos)
    return total, comp


@jit
def finish(
    rank_count,
    neg_total,
    neg_comp,
    pos_sorted,
    pos_index,
    n_neg,
    coef,
    sum_pos,
    sum_neg,
    ref,
    shift=0.0,
):
    """Coefficients of the positives from the negatives per rank; the result tuple
    (OK, -1, sum_pos, sum_neg, negatives above each positive, ``F(R_bar) - F(R*)``).
    ``neg_total + neg_comp``: the compensated sum of ``(w / (P N)) (score - ref)`` over the
    negatives (`qs.inference._hinge`), which the positives' terms join.
    ``coef`` gets the coefficients less ``shift`` (a gradient's ``coef(R*)``)."""
    n_pos = pos_sorted.size
    n_above = np.empty(n_pos, dtype=np.int64)
    inv = 1.0 / (n_pos * n_neg)
    total, comp = neg_total, neg_comp
    above = rank_count[0]
    for k in range(n_pos):
        above += rank_count[k + 1]
        n_above[k] = above
        coef[pos_index[k]] = (n_neg - 2.0 * above) * inv - shift
        total, comp = add(total, comp, -above * inv * (pos_sorted[k] - ref))
    return OK, -1, sum_pos, sum_neg, n_above, score_term(total, comp)


@jit_inline
def negative_coefficients(scores, is_pos, neg_rank, n_pos, n_neg, coef, ref, rank_count):
    """Fill the negatives' ``coef`` from their ranks (in input order), counting them per rank
    into ``rank_count`` (P + 2 elements, zeroed here); return the compensated sum of
    ``(w / (P N)) (score - ref)`` over the negatives (`qs.inference._hinge`) as (total,
    compensation)."""
    for r in range(rank_count.size):
        rank_count[r] = 0
    inv = 1.0 / (n_pos * n_neg)
    total = 0.0
    comp = 0.0
    q = np.uintp(0)
    for k in range(scores.size):
        if is_pos[k]:
            continue
        r = neg_rank[q]
        coef[k] = (n_pos + 2 - 2 * r) * inv
        total, comp = add(total, comp, (n_pos + 1 - r) * inv * (scores[k] - ref))
        rank_count[np.uintp(r)] += 1
        q += ONE
    return total, comp


@jit
def finish_sorted(
    v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef, sum_pos, sum_neg, ref
):
    """The result tuple of a method that ranked the negatives sorted alone (scores ``v``,
    ranks ``rk``; `qs.inference._prepare.run_sorted`): the ranks given back to the
    negatives by value, in input order, their coefficients, then `finish`."""
    n_pos, n_neg = pos_sorted.size, v.size
    n_ent = min(n_pos + 1, n_neg)
    ent_rank = np.empty(n_ent, dtype=np.int64)
    ent_lo = np.empty(n_ent)
    ent_hi = np.empty(n_ent)
    ent_eq_lo = np.empty(n_ent, dtype=np.int64)
    ent_eq_hi = np.empty(n_ent, dtype=np.int64)
    n_ent = rank_entries(v, rk, 0, n_neg - 1, ent_rank, ent_lo, ent_hi, ent_eq_lo, ent_eq_hi, 0)
    assign_by_value(
        scores,
        is_pos,
        ent_rank[:n_ent],
        ent_lo[:n_ent],
        ent_hi[:n_ent],
        ent_eq_lo[:n_ent],
        ent_eq_hi[:n_ent],
        neg_rank,
    )
    rank_count = np.empty(n_pos + 2, dtype=np.int64)
    total, comp = negative_coefficients(
        scores, is_pos, neg_rank, n_pos, n_neg, coef, ref, rank_count
    )
    return finish(
        rank_count, total, comp, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg, ref
    )
