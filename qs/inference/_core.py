"""Kernels shared by the LAI methods.

Notation (paper 000, DESIGN.md): P positives sorted by descending score ``s+_1 >= ...``;
a negative of score ``s`` at place ``j`` (1-based, among negatives sorted by descending
score) moved from interleaving rank ``i`` to ``i+1`` changes the objective by

    inc_j(i) = 2 (s+_i - s) / (P N) + delta_j(i+1) - delta_j(i).

Every method returns, for each negative, the *largest* maximiser over ranks of the partial
sums of these increments, and evaluates them with the same expression
``spos[i] - c2 * s + inc(j, i, P, params)`` (``spos[i] = c2 * s+_i``, ``c2 = 2/(PN)``) so
that all methods compare the same floating-point numbers.

Ties among negatives: the one earlier in the input takes the smaller place ``j`` (so a rank
no larger). Methods that partition or sort score values without their indices produce
"rank segments" (:func:`rank_entries`), and :func:`assign_by_value` gives the ranks back to
the negatives in input order, applying that rule to tied scores that straddle a rank change.
"""

import numpy as np

from qs._numba import jit, jit_generic

# Input errors found inside kernels, as codes turned into messages by the Python API.
OK, NOT_FINITE = 0, 1


@jit
def scan_input(scores, is_pos):
    """One pass: finiteness, counts, sums, the negatives' range and the positives.

    Returns (error, error_index, n_pos, sum_pos, sum_neg, neg_min, neg_max, pos_values,
    pos_index); the positives come back in input order.
    """
    n = scores.size
    n_pos = 0
    for k in range(n):
        n_pos += is_pos[k]
    pos_values = np.empty(n_pos)
    pos_index = np.empty(n_pos, dtype=np.int64)
    sum_pos = 0.0
    sum_neg = 0.0
    neg_min = np.inf
    neg_max = -np.inf
    p = 0
    for k in range(n):
        s = scores[k]
        if not np.isfinite(s):
            return NOT_FINITE, k, n_pos, 0.0, 0.0, 0.0, 0.0, pos_values, pos_index
        if is_pos[k]:
            pos_values[p] = s
            pos_index[p] = k
            p += 1
            sum_pos += s
        else:
            sum_neg += s
            if s < neg_min:
                neg_min = s
            if s > neg_max:
                neg_max = s
    return OK, -1, n_pos, sum_pos, sum_neg, neg_min, neg_max, pos_values, pos_index


@jit
def gather_negatives(scores, is_pos, n_neg):
    """The negatives' scores, in input order."""
    out = np.empty(n_neg)
    q = 0
    for k in range(scores.size):
        if not is_pos[k]:
            out[q] = scores[k]
            q += 1
    return out


@jit_generic
def best_rank(inc, params, n_pos, c2, spos, s, j, lo, hi):
    """Largest maximiser over ranks ``lo..hi`` of the objective of one negative (score s, place j)."""
    cs = c2 * s
    best = lo
    f = 0.0
    best_f = 0.0
    for i in range(lo, hi):
        f += spos[i] - cs + inc(j, i, n_pos, params)
        if f >= best_f:
            best_f = f
            best = i + 1
    return best


@jit
def select_descending(v, lo, hi, k):
    """Quickselect: reorder ``v[lo..hi]`` so that ``v[k]`` is the value of that place in
    descending order, larger values before it and smaller after (Hoare, median of three)."""
    while hi - lo > 16:
        mid = (lo + hi) >> 1
        a, b, c = v[lo], v[mid], v[hi]
        if a < b:
            a, b = b, a
        if b < c:
            b, c = c, b
            if a < b:
                a, b = b, a
        pivot = b
        i, j = lo, hi
        while i <= j:
            while v[i] > pivot:
                i += 1
            while v[j] < pivot:
                j -= 1
            if i <= j:
                v[i], v[j] = v[j], v[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return
    # insertion sort of the short remainder (descending)
    for a in range(lo + 1, hi + 1):
        x = v[a]
        b = a - 1
        while b >= lo and v[b] < x:
            v[b + 1] = v[b]
            b -= 1
        v[b + 1] = x


@jit_generic
def opt_ranks(v, rk, lo, hi, j_offset, places, r_lo, r_hi, select, inc, params, n_pos, c2, spos):
    """Algorithm 1 of paper 000 (OptRanks) on ``v[lo..hi]``, whose ranks lie in ``r_lo..r_hi``.

    ``v[lo..hi]`` holds the negatives of places ``j_offset+1 ..`` in some order, or, when
    ``places`` is an array, sorted scores whose places are ``places[lo..hi]``. With
    ``select`` the median is found by quickselect (the paper's Median + Select); without it
    ``v`` must already be sorted in descending order. Writes the rank of the value that ends
    up at each position into ``rk``; afterwards ranks are non-decreasing along ``v``.
    """
    stack = np.empty((130, 4), dtype=np.int64)
    top = 0
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = lo, hi, r_lo, r_hi
    top = 1
    while top > 0:
        top -= 1
        a, b, ra, rb = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        if a > b:
            continue
        if ra == rb:
            rk[a : b + 1] = ra
            continue
        m = (a + b) >> 1
        if select:
            select_descending(v, a, b, m)
        if places is None:
            j = j_offset + m + 1
        else:
            j = places[m]
        rm = best_rank(inc, params, n_pos, c2, spos, v[m], j, ra, rb)
        rk[m] = rm
        # push the larger half first so the stack stays logarithmic
        if m - a > b - m:
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = a, m - 1, ra, rm
            stack[top + 1, 0], stack[top + 1, 1] = m + 1, b
            stack[top + 1, 2], stack[top + 1, 3] = rm, rb
        else:
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = m + 1, b, rm, rb
            stack[top + 1, 0], stack[top + 1, 1] = a, m - 1
            stack[top + 1, 2], stack[top + 1, 3] = ra, rm
        top += 2


@jit
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


@jit
def assign_by_value(s, start, end, ent_rank, ent_lo, ent_hi, left_lo, left_hi, cursor):
    """Rank of a negative of score ``s`` from rank segments ``start..end-1`` (descending).

    Called for negatives in input order. A score shared by several segments (a tie that
    straddles a rank change) hands out that score's ranks in increasing order, consuming the
    per-segment counts ``left_lo``/``left_hi``; ``cursor[e]`` tracks progress along the chain
    of segments that starts at ``e``.
    """
    a = start
    b = end
    while a < b:  # first segment whose smallest score is <= s
        m = (a + b) >> 1
        if ent_lo[m] <= s:
            b = m
        else:
            a = m + 1
    e = a
    if s != ent_lo[e] or e + 1 >= end or ent_hi[e + 1] != s:
        return ent_rank[e]
    c = cursor[e]
    if c == e:
        left_lo[e] -= 1
        if left_lo[e] == 0:
            cursor[e] = e + 1
    else:
        left_hi[c] -= 1
        if left_hi[c] == 0:
            cursor[e] = c + 1
    return ent_rank[c]


def new_entries(n):
    """Arrays for at most ``n`` rank segments: rank, lo, hi, eq_lo, eq_hi."""
    return (
        np.empty(n, dtype=np.int64),
        np.empty(n),
        np.empty(n),
        np.empty(n, dtype=np.int64),
        np.empty(n, dtype=np.int64),
    )


@jit
def assign_all(scores, is_pos, n_pos, n_neg, ent_rank, ent_lo, ent_hi, ent_eq_lo, ent_eq_hi,
               n_ent, neg_rank, coef, rank_count):
    """Give every negative (input order) its rank from one table of rank segments; fill its
    coefficient and the count of negatives per rank; return sum of coef * score over them."""
    left_lo = ent_eq_lo[:n_ent].copy()
    left_hi = ent_eq_hi[:n_ent].copy()
    cursor = np.arange(n_ent)
    inv = 1.0 / (n_pos * n_neg)
    dot = 0.0
    q = 0
    for k in range(scores.size):
        if is_pos[k]:
            continue
        s = scores[k]
        r = assign_by_value(s, 0, n_ent, ent_rank, ent_lo, ent_hi, left_lo, left_hi, cursor)
        neg_rank[q] = r
        c = (n_pos + 2 - 2 * r) * inv
        coef[k] = c
        dot += c * s
        rank_count[r] += 1
        q += 1
    return dot
