"""Algorithm 1 of Mohapatra et al., CVPR 2018: the rank evaluations and the divide and
conquer over ranks that every exact method runs, on sorted or unsorted negatives.

Notation (Mohapatra et al., CVPR 2018): P positives sorted by descending score ``s+_1 >= ...``;
a negative of score ``s`` at place ``j`` (1-based, among negatives sorted by descending
score) moved from interleaving rank ``i`` to ``i+1`` changes the objective by

    inc_j(i) = 2 (s+_i - s) / (P N) + delta_j(i+1) - delta_j(i).

Every method returns, for each negative, the *largest* maximiser over ranks of the partial
sums of these increments, and evaluates them with the same expression
``spos[i] - c2 * (s - ref) + increment(inc, j, i, P, params)`` (``spos[i] = c2 * (s+_i -
ref)``, ``c2 = 2/(PN)``) so that all methods compare the same floating-point numbers.
"""

import numpy as np
from numba import types
from numba.extending import overload

from qs._numba import ONE, jit, jit_inline
from qs.inference._sorting import insertion_sort_pairs, median_of_three, partition_pairs
from qs.losses import AP_CODE, ap_increment, increment


@jit
def positive_steps(pos_sorted, n_neg, ref):
    """What every rank evaluation reads of the positives ``pos_sorted`` (descending): (c2,
    spos), the scale ``c2 = 2 / (P N)`` of the score term and ``spos[i] = c2 * (s+_i - ref)``
    (1-based); ``spos[0] = ref``, the reference score, so that the rank evaluations that take
    ``spos`` also know it."""
    spos = np.empty(pos_sorted.size + 1)
    return positive_steps_into(pos_sorted, n_neg, ref, spos), spos


@jit
def positive_steps_into(pos_sorted, n_neg, ref, spos):
    """`positive_steps` written into ``spos`` (P + 1 elements); returns c2."""
    c2 = 2.0 / (pos_sorted.size * n_neg)
    spos[0] = ref
    for i in range(pos_sorted.size):
        spos[i + 1] = c2 * (pos_sorted[i] - ref)
    return c2


@jit_inline
def best_rank(inc, params, n_pos, c2, spos, s, j, lo, hi):
    """Largest maximiser over ranks ``lo..hi`` of the objective of one negative (score s, place j);
    ``spos[0]`` is the reference score (see `positive_steps`)."""
    cs = c2 * (s - spos[0])
    best = lo
    # gain: objective at rank i+1 minus the best so far, summed from the best so that small
    # increments are not absorbed by a large running total
    gain = 0.0
    for i in range(np.uintp(lo), np.uintp(hi)):
        gain += spos[i] - cs + increment(inc, j, np.int64(i), n_pos, params)
        if gain >= 0.0:
            best = np.int64(i) + 1
            gain = 0.0
    return best


def negative_increments(inc):
    """Whether every loss increment ``delta_j(i+1) - delta_j(i)`` of ``inc`` is negative: so
    for the built-in losses (AP: ``-i / (P (j+i-1)(j+i))``; NDCG: the discount decreases),
    not known for a user's loss."""
    return isinstance(inc, int)


@overload(negative_increments, inline="always")
def _negative_increments_numba(inc):
    if isinstance(inc, types.Integer):
        return lambda inc: True
    return lambda inc: False


#: rank intervals at least this wide are cut by `score_cap` (narrower ones cost it more
#: in mispredicted tests than it saves)
CAP_MIN = 64


@jit_inline
def score_cap(spos, cs, lo, hi):
    """The first rank ``U`` in ``lo..hi`` whose positive does not score above the negative
    (``spos[U] - cs <= 0``; ``hi`` when none in ``lo..hi-1``), searched from ``hi`` down by
    doubling steps, then halving: O(log(hi - U)) tests, one when nothing is cut. ``spos``
    does not increase with the rank."""
    if hi - lo < 2 or spos[hi - 1] - cs > 0.0:
        return hi
    b = hi - 1  # spos[b] - cs <= 0: U <= b
    step = 1
    a = b - step
    while a > lo and spos[a] - cs <= 0.0:
        b = a
        step *= 2
        a = b - step
    a = max(a, lo)
    while a < b:  # U in a..b
        m = (a + b) >> 1
        if spos[m] - cs > 0.0:
            a = m + 1
        else:
            b = m
    return b


@jit_inline
def best_rank_capped(inc, params, n_pos, c2, spos, s, j, lo, hi):
    """`best_rank`, the same rank, with fewer evaluations for the built-in losses.

    From the first rank ``U`` whose positive does not score above the negative, every
    increment is negative (a score term ``spos[i] - cs <= 0`` plus a negative loss
    increment, also in floating point), so the gain never returns to 0 there: the largest
    maximiser is at most ``U``, and the search stops at it (`score_cap`). It pays on
    the wide rank intervals of the divide and conquer's first levels, whose blocks span the
    ranks of all their places (from `CAP_MIN` ranks on)."""
    if negative_increments(inc) and hi - lo > CAP_MIN:
        hi = score_cap(spos, c2 * (s - spos[0]), lo, hi)
    return best_rank(inc, params, n_pos, c2, spos, s, j, lo, hi)


@jit
def opt_ranks_sorted(v, rk, lo, hi, j_offset, places, r_lo, r_hi, inc, params, n_pos, c2, spos):
    """The divide and conquer of Algorithm 1 on scores already in descending order.

    ``v[lo..hi]`` are the negatives of places ``j_offset+1 ..``, or, when ``places`` is an
    array, points (score, place) with places ``places[lo..hi]``. Writes each rank in ``rk``.
    Each block goes on to its left half at once and keeps only a non-empty right half on the
    stack (at most one per level); a block of one rank is filled by a loop. The same rank
    evaluations as pushing both halves, with fewer stack moves and branches.
    """
    stack = np.empty((64, 4), dtype=np.int64)
    top = 0
    a, b, ra, rb = lo, hi, r_lo, r_hi
    while True:
        if ra == rb:  # unsigned (see ONE): the fill vectorises
            for t in range(np.uintp(a), np.uintp(b + 1)):
                rk[t] = ra
        elif a <= b:
            m = (a + b) >> 1
            j = j_offset + m + 1 if places is None else places[m]
            rm = best_rank_capped(inc, params, n_pos, c2, spos, v[m], j, ra, rb)
            rk[m] = rm
            if m < b:
                stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = m + 1, b, rm, rb
                top += 1
            if a < m:
                b, rb = m - 1, rm
                continue
        if top == 0:
            return
        top -= 1
        a, b, ra, rb = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]


#: a place after every negative: no row of the loss's objective is known to be concave
NO_PLACE = np.int64(1) << np.int64(62)


def concave_place(inc, n_pos):
    """The first place ``j`` from which a negative's objective is concave over all ranks
    ``1 .. P + 1`` (its increments non-increasing in the rank): ``P`` for AP, whose
    increments are non-increasing over the first ``min(j, P)`` ranks (Mohapatra et al.,
    arXiv:1604.08269, Proposition 5; DESIGN.md); `NO_PLACE` for the other losses."""
    return n_pos if isinstance(inc, int) and inc == AP_CODE else NO_PLACE


@overload(concave_place, inline="always")
def _concave_place_numba(inc, n_pos):
    if isinstance(inc, types.Integer):
        return lambda inc, n_pos: np.int64(n_pos) if inc == AP_CODE else NO_PLACE
    return lambda inc, n_pos: NO_PLACE


#: the last place whose AP row `capped_concave_place` may certify: below it the loss
#: increments of ranks ``i < j - 1`` differ by more than their rounding (their relative step
#: ``(j - 1 - i) / (i (j + i + 1))`` is at least ``1 / (2 j^2)``, above 100 units of rounding)
CAPPED_PLACE_MAX = 1 << 24


#: places per block of `capped_concave_place`'s scan
CAPPED_BLOCK = 64


@jit_inline
def _first_not_above(spos, cs, n_pos):
    """The first rank ``U`` in ``1 .. P + 1`` whose positive does not score above the negative
    (``spos[U] - cs <= 0``; ``P + 1`` when every positive does), by bisection."""
    a, b = np.int64(1), np.int64(n_pos + 1)
    while a < b:
        m = (a + b) >> 1
        if spos[m] - cs > 0.0:
            a = m + 1
        else:
            b = m
    return a


@jit_inline
def capped_concave_place(v, j0, n_pos, c2, spos):
    """The first place ``j1 <= j0`` (AP's `concave_place`) from which every negative's row is
    known concave where it matters, or ``j0`` where none before it is.

    AP's loss increment ``-i / (P (j+i-1)(j+i))`` falls with the rank ``i`` while ``i <= j -
    1`` (strictly below it), the score term ``spos[i] - cs`` never rises, and from the first
    rank ``U`` whose positive does not score above the negative every increment is negative
    (`best_rank_capped`): a place ``j < j0`` whose ``U <= j`` has increments that fall over
    ranks ``1 .. U - 1`` and are negative from ``U`` on, so its largest maximiser is the
    first rank of a negative increment, found by the monotone sweep of `opt_ranks_swept`.
    The places are scanned from ``min(j0, N)`` up (higher scores) while the test holds;
    ``j1`` is the last one that fails it (1 when none does), whose rank the sweep starts
    from. ``U`` does not fall with the place, so a block of `CAPPED_BLOCK` places passes
    as a whole when the ``U`` of its last place is at most its first place: one bisection
    (`_first_not_above`) per block, and one per place only in the blocks that do not.
    ``v`` are the negatives by descending score."""
    top = min(j0, v.size)
    if top > CAPPED_PLACE_MAX or top < 2:
        return j0
    ref = spos[0]
    if _first_not_above(spos, c2 * (v[top - 1] - ref), n_pos) > top:
        return j0
    b = top  # the places from b on pass
    while b > 1:
        a = max(1, b - CAPPED_BLOCK)  # the block of places a .. b - 1
        if _first_not_above(spos, c2 * (v[b - 2] - ref), n_pos) > a:
            for j in range(b - 1, a - 1, -1):
                if _first_not_above(spos, c2 * (v[j - 1] - ref), n_pos) > j:
                    return np.int64(j)
        b = a
    return np.int64(1)


#: AP's sweep tests ``a - i / d >= 0`` (``a`` the score term, ``d = (j+i-1)(j+i) P``) by
#: the product ``a * d`` where it exceeds ``i`` by more than these factors, either way: they
#: leave room for the roundings of the product and of the quotient (each under 2^-52
#: relative), so that the answer is the quotient's
SURELY_ABOVE, SURELY_BELOW = 1.0 + 2.0**-40, 1.0 - 2.0**-40


@jit_inline
def ap_non_negative(a, j, i, n_pos):
    """``a + increment(AP_CODE, j, i, n_pos, params) >= 0``, AP's increment with the score
    term ``a``: by the product ``a * d`` where it differs from ``i`` by more than
    `SURELY_ABOVE` or `SURELY_BELOW`, by the same expression otherwise."""
    t = a * ((j + i - 1.0) * (j + i) * n_pos)
    if t > i * SURELY_ABOVE:
        return True
    if t < i * SURELY_BELOW:
        return False
    return a + ap_increment(j, i, n_pos, None) >= 0.0


@jit_inline
def opt_ranks_swept(v, rk, inc, params, n_pos, c2, spos):
    """The ranks of all negatives ``v`` (descending: places 1 .. N) into ``rk``: Algorithm 1's
    divide and conquer (`opt_ranks_sorted`) above the place `concave_place` (for AP, the
    earlier one of `capped_concave_place` where there is one), and from it on a monotone
    sweep.

    Where a negative's objective is concave in the rank, its largest maximiser is the first
    rank whose increment is negative (`best_rank` finds the same: its gain resets at
    every non-negative increment and only falls after the first negative one), and the ranks
    are non-decreasing in the place: each negative goes on from the rank of the one before,
    O(N + P) rank evaluations in all, where the divide and conquer makes about P log N.
    AP's increment ``a - i / d`` is tested by the product ``a * d`` against ``i`` where they
    differ by more than the roundings (`SURELY_ABOVE`, `SURELY_BELOW`), by the quotient
    otherwise: the same answer, the division (several times a product's cost) mostly saved.
    """
    n = v.size
    j0 = concave_place(inc, n_pos)
    if j0 != NO_PLACE:
        j0 = capped_concave_place(v, j0, n_pos, c2, spos)
    if j0 > n:
        opt_ranks_sorted(v, rk, 0, n - 1, 0, None, 1, n_pos + 1, inc, params, n_pos, c2, spos)
        return
    m0 = j0 - 1
    r = best_rank_capped(inc, params, n_pos, c2, spos, v[m0], j0, 1, n_pos + 1)
    rk[m0] = r
    if m0 > 0:
        opt_ranks_sorted(v, rk, 0, m0 - 1, 0, None, 1, r, inc, params, n_pos, c2, spos)
    ref = spos[0]
    for m in range(m0 + 1, n):  # AP's rows: only its concave_place lies within the places
        cs = c2 * (v[m] - ref)
        while r <= n_pos and ap_non_negative(spos[r] - cs, m + 1, r, n_pos):
            r += 1
        rk[m] = r


@jit_inline
def _has_equal_neighbours(v, a, b):
    """Whether two neighbours of ``v[a..b]`` are equal (counted without a branch, unsigned)."""
    equal = 0
    for k in range(np.uintp(a), np.uintp(b)):
        equal += v[k] == v[k + ONE]
    return equal > 0


@jit
def opt_ranks_unsorted(
    v, idx, rk, lo, hi, j_offset, r_lo, r_hi, inc, params, n_pos, c2, spos, stack, pivot, split
):
    """Algorithm 1 of Mohapatra et al., CVPR 2018 (OptRanks) on the unsorted block ``v[lo..hi]``
    (the negatives of places ``j_offset+1 ..``), whose ranks lie in ``r_lo..r_hi``.

    As in quicksort, each block is split once around a pivot value ``p`` (median of three at
    pseudo-random places) rather than at its exact median: the block's part above ``p`` has
    ranks at most ``r(p, last place of that part)``, the rest at least ``r(p, first place of
    it)``, so two rank evaluations split the rank interval. When nothing is above ``p``, the
    values equal to it form a sorted block of their own (``p`` need not be one of the values:
    the bounds hold for any ``p``). Small blocks are sorted and split at their middle
    element. ``idx`` moves with ``v``; ``rk`` receives the rank at each position,
    non-decreasing along ``v`` at the end. ``stack`` is scratch space from `new_stack`.
    ``split``: -1, or where the block, already split around ``pivot``, starts its part at
    most ``pivot`` (``v[lo..split-1] > pivot >= v[split..hi]``, as `scan_gather_split`
    leaves the negatives): the first split, made for free.

    Returns whether equal values may have been given different ranks, which
    `canonical_ties` then settles: a split around a pivot never separates equal values,
    so only a sorted block holding equal values can.
    """
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3], stack[0, 4] = lo, hi, r_lo, r_hi, 0
    top = 1
    state = np.uint64(lo + hi)  # the pivots' places: pseudo-random, the same on every run
    tied = False
    while top > 0:
        top -= 1
        a, b, ra, rb, is_sorted = (
            stack[top, 0],
            stack[top, 1],
            stack[top, 2],
            stack[top, 3],
            stack[top, 4],
        )
        given, split = split, -1  # the first block's split, when given
        if a > b:
            continue
        if ra == rb:  # unsigned (see ONE): the fill vectorises, 5x faster
            for t in range(np.uintp(a), np.uintp(b + 1)):
                rk[t] = ra
            continue
        if not is_sorted and b - a < 24:
            insertion_sort_pairs(v, idx, a, b)
            is_sorted = 1
            tied |= _has_equal_neighbours(v, a, b)
        if is_sorted:
            m = (a + b) >> 1
            rm = best_rank_capped(inc, params, n_pos, c2, spos, v[m], j_offset + m + 1, ra, rb)
            rk[m] = rm
            first, second = (a, m - 1, ra, rm, 1), (m + 1, b, rm, rb, 1)
        else:
            if given >= 0:
                p, i = pivot, given
            else:
                p, state = median_of_three(v, a, b, state)
                i = partition_pairs(v, idx, a, b, p, True)  # v[a..i-1] > p >= v[i..b]
            above_sorted = 0
            r_above = ra
            if i > a:
                r_above = best_rank_capped(inc, params, n_pos, c2, spos, p, j_offset + i, ra, rb)
            else:  # nothing above p: the values equal to p come first, a sorted block
                i = partition_pairs(v, idx, a, b, p, False)  # v[a..i-1] == p > v[i..b]
                above_sorted = 1
                tied |= i - a > 1
            r_below = best_rank_capped(
                inc, params, n_pos, c2, spos, p, j_offset + i + 1, r_above, rb
            )
            if above_sorted:
                r_above = r_below
            upper, lower = (a, i - 1, ra, r_above, above_sorted), (i, b, r_below, rb, 0)
            # the smaller part on top: the stack stays logarithmic
            first, second = (upper, lower) if i - a > b + 1 - i else (lower, upper)
        stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3], stack[top, 4] = first
        top += 1
        stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3], stack[top, 4] = second
        top += 1
    return tied


#: the shape of `new_stack`'s array, and its number of elements
STACK_SHAPE = (200, 5)
STACK_SIZE = STACK_SHAPE[0] * STACK_SHAPE[1]


@jit
def new_stack():
    """Scratch space for `opt_ranks_unsorted`: it keeps the smaller part of each split on
    top, so at most about 2 log2(block) entries are held."""
    return np.empty(STACK_SHAPE, dtype=np.int64)
