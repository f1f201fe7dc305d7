"""Sorting the scores: merge and insertion sorts of (score, index) pairs, the bucket sort
that orders the negatives of ``bucket_sort`` and the many positives of every method, the
positives' sort that starts from the order of the last call, and the pivots and partitions
of Algorithm 1's divide and conquer.

Every sort is descending, ties by ascending index (input order), as the methods' tie rule
asks (see `qs.inference._output`).
"""

import numpy as np

from qs._numba import ONE, jit, jit_inline


@jit
def bucket_of(s, low, scale, top):
    """Bucket ``0..top`` of score ``s``: ``floor((s - low) * scale)``, clamped (also for
    scores outside the range the buckets were laid over). Unsigned, so that tables indexed
    by it skip numba's negative-index wraparound (see `ONE`)."""
    x = (s - low) * scale
    if x >= top:
        return np.uintp(top)
    if x >= 1.0:
        return np.uintp(int(x))
    return np.uintp(0)  # also when x is NaN (an overflowed difference times a zero scale)


#: most buckets a histogram gets (int32 counts: 256 KB, within a core's L2 cache)
MAX_BUCKETS = 1 << 16


#: runs this long are sorted by insertion before `sort_pairs` merges them
MERGE_RUN = 16


@jit
def sort_pairs(v, idx, tmp_v, tmp_i):
    """Sort ``v`` in descending order, ties by ascending ``idx``, moving ``idx`` along:
    insertion sort of short runs, then bottom-up merges through the scratch arrays
    ``tmp_v``, ``tmp_i`` (at least ``v.size`` elements). Written here rather than
    ``np.argsort``: the same O(n log n) merge sort without its gathers, compiled in about a
    quarter of the time."""
    n = v.size
    for lo in range(0, n, MERGE_RUN):
        for a in range(lo + 1, min(lo + MERGE_RUN, n)):
            x, ix = v[a], idx[a]
            b = a
            while b > lo and (v[b - 1] < x or (v[b - 1] == x and idx[b - 1] > ix)):
                v[b], idx[b] = v[b - 1], idx[b - 1]
                b -= 1
            v[b], idx[b] = x, ix
    src_v, src_i, dst_v, dst_i = v, idx, tmp_v, tmp_i
    in_tmp = False
    width = MERGE_RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b = lo, mid
            for k in range(lo, hi):
                if b < hi and (
                    a >= mid
                    or src_v[b] > src_v[a]
                    or (src_v[b] == src_v[a] and src_i[b] < src_i[a])
                ):
                    dst_v[k], dst_i[k] = src_v[b], src_i[b]
                    b += 1
                else:
                    dst_v[k], dst_i[k] = src_v[a], src_i[a]
                    a += 1
        src_v, src_i, dst_v, dst_i = dst_v, dst_i, src_v, src_i
        in_tmp = not in_tmp
        width *= 2
    if in_tmp:
        for k in range(n):
            v[k], idx[k] = tmp_v[k], tmp_i[k]


@jit
def insertion_sort_pairs(v, idx, lo, hi):
    """Insertion sort of ``v[lo..hi]`` (descending), moving ``idx`` along."""
    first = np.uintp(lo)
    for a in range(first + ONE, np.uintp(hi + 1)):
        x, ix = v[a], idx[a]
        b = a  # the hole
        while b > first and v[b - ONE] < x:
            v[b], idx[b] = v[b - ONE], idx[b - ONE]
            b -= ONE
        v[b], idx[b] = x, ix


#: buckets larger than this are sorted by merge sort instead of insertion
INSERTION_MAX = 32
#: the buckets are laid over the range of this many scores, strided
RANGE_SAMPLE = 1024


#: from this many scores on, `sort_by_buckets` first scatters them into
#: ``COARSE_BUCKETS`` buckets, then sorts each of those by buckets of its own: one scatter
#: into 2^16 buckets missed the cache at nearly every move once the scores outgrew it
TWO_LEVEL_MIN = 1 << 17
COARSE_BUCKETS = 1 << 10


@jit_inline
def _scatter(v, key, count, v_out, key_out):
    """``v`` (keys ``key``) into ``v_out``, ``key_out`` by ``count.size`` equal buckets over
    the range of a strided sample of it (scores beyond go to the end buckets), the highest
    bucket first, input order within a bucket; ``count[b]`` ends as where bucket ``b``
    ends."""
    n = v.size
    low = np.inf
    high = -np.inf
    for q in range(0, n, max(1, n // RANGE_SAMPLE)):
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
        v_out[p] = v[q]
        key_out[p] = key[q]
        count[b] = p + 1  # ends at the next bucket's start


@jit_inline
def _sort_buckets(v, key, ends, tmp_v, tmp_key, one_pass):
    """Sort each bucket of ``v`` (ends ``ends``, the highest bucket first) in place, ties by
    key: the buckets of more than `INSERTION_MAX` scores by `sort_pairs` through
    the scratch arrays, the others by insertion, each alone or (``one_pass``) by one
    insertion sort of the whole of ``v``, which moves each score only within its bucket
    (none in the buckets sorted already). Sorting each small bucket alone tests its size at
    every bucket, a test the processor mispredicts at about every one; the one pass saves
    that on the fine buckets of `sort_by_buckets`' second level, and costs more on its
    single level."""
    lo = 0
    for b in range(ends.size - 1, -1, -1):
        hi = ends[b]
        m = hi - lo
        if m > INSERTION_MAX:
            sort_pairs(v[lo:hi], key[lo:hi], tmp_v[lo:hi], tmp_key[lo:hi])
        elif m > 1 and not one_pass:
            insertion_sort_pairs(v, key, lo, hi - 1)
        lo = hi
    if one_pass:
        insertion_sort_pairs(v, key, 0, v.size - 1)


@jit_inline
def sort_by_buckets(v, key, count, v_sorted, key_sorted):
    """The scores ``v`` (keys ``key``, input order) in descending order into ``v_sorted``,
    ``key_sorted``, by buckets (about one per score); ties keep input order (a key order
    that follows input order). ``count``: the histogram's scratch (one element per bucket);
    ``v`` and ``key`` are scratch once read. From `TWO_LEVEL_MIN` scores on (and
    ``count`` of at least 4 `COARSE_BUCKETS`), coarse buckets first, each then sorted
    by its own buckets while it is in cache."""
    n = v.size
    if n < TWO_LEVEL_MIN or count.size < 4 * COARSE_BUCKETS:
        _scatter(v, key, count, v_sorted, key_sorted)
        _sort_buckets(v_sorted, key_sorted, count, v, key, False)
        return
    coarse = count[:COARSE_BUCKETS]
    _scatter(v, key, coarse, v_sorted, key_sorted)
    ends = count[COARSE_BUCKETS : 2 * COARSE_BUCKETS]
    ends[:] = coarse
    fine_all = count[2 * COARSE_BUCKETS :]
    lo = 0
    for c in range(COARSE_BUCKETS - 1, -1, -1):
        hi = ends[c]
        m = hi - lo
        if m > 1:
            fine = fine_all[: min(fine_all.size, max(16, m))]
            _scatter(v_sorted[lo:hi], key_sorted[lo:hi], fine, v[lo:hi], key[lo:hi])
            _sort_buckets(v[lo:hi], key[lo:hi], fine, v_sorted[lo:hi], key_sorted[lo:hi], True)
            v_sorted[lo:hi] = v[lo:hi]
            key_sorted[lo:hi] = key[lo:hi]
        lo = hi


#: above this many positives, they are sorted by buckets (`sort_by_buckets`, O(P)
#: expected) rather than by merge sort (O(P log P), its comparisons mispredicted)
POSITIVES_BY_BUCKETS = 256


@jit
def sort_positives(pos_values, pos_index):
    """The positives by descending score, ties in input order (``pos_index`` ascending)."""
    n = pos_values.size
    if n > POSITIVES_BY_BUCKETS:
        pos_sorted, pos_order = np.empty(n), np.empty(n, dtype=np.int64)
        sort_by_buckets(
            pos_values.copy(),
            pos_index.copy(),
            np.empty(min(MAX_BUCKETS, n), dtype=np.int64),
            pos_sorted,
            pos_order,
        )
        return pos_sorted, pos_order
    pos_sorted, pos_order = pos_values.copy(), pos_index.copy()
    sort_pairs(pos_sorted, pos_order, np.empty(n), np.empty(n, dtype=np.int64))
    return pos_sorted, pos_order


#: moves per positive the insertion sort of `sort_positives_hinted` may make, counted
#: from its start with ``HINT_FIRST`` positives' moves in hand: an order unrelated to the
#: scores (the last call's, on other scores of the same sizes) makes about a / 2 moves at the
#: a-th positive and is given up within the first hundred, where a budget for all of them
#: would spend 8 P moves first
HINT_MOVES = 8
HINT_FIRST = 64


@jit_inline
def _is_permutation(order, seen):
    """Whether ``order`` holds each of 0 .. size-1 once (``seen``: scratch of its size)."""
    n = order.size
    for t in range(n):
        seen[t] = 0
    for t in range(n):
        o = order[t]
        if o < 0 or o >= n or seen[o]:
            return False
        seen[o] = 1
    return True


@jit_inline
def sort_positives_hinted(pos_values, pos_index, order, tmp_v, tmp_i, count):
    """`sort_positives` in place, starting from the arrangement ``order`` (the positives'
    order of a previous call, as places in input order) and leaving the new one there.

    Inside training the order of the positives changes little from one call to the next
    (median 150-190 exchanges of neighbours among 225 positives on the VOC2011 data, AP), so
    an insertion sort from the previous order takes about P moves, where the merge sort made
    P log P comparisons whose branches the processor cannot predict.
    It gives up past `HINT_MOVES` moves per positive so far (and when ``order`` is not a
    permutation) for `sort_pairs`, or for `sort_by_buckets` (``count``: its
    scratch, at least 16 elements) above `POSITIVES_BY_BUCKETS` positives. Ties go by input
    order either way: the result does not depend on ``order``."""
    n = pos_values.size
    if _is_permutation(order, tmp_i):
        for t in range(n):
            o = order[t]
            tmp_v[t] = pos_values[o]
            tmp_i[t] = o
        budget = HINT_MOVES * HINT_FIRST
        for a in range(1, n):
            x, ix = tmp_v[a], tmp_i[a]
            b = a
            while b > 0 and (tmp_v[b - 1] < x or (tmp_v[b - 1] == x and tmp_i[b - 1] > ix)):
                tmp_v[b], tmp_i[b] = tmp_v[b - 1], tmp_i[b - 1]
                b -= 1
            tmp_v[b], tmp_i[b] = x, ix
            budget += HINT_MOVES - (a - b)
            if budget < 0:
                break
        if budget >= 0:
            for t in range(n):
                o = tmp_i[t]
                order[t] = o
                pos_values[t] = tmp_v[t]
                tmp_i[t] = pos_index[o]
            for t in range(n):
                pos_index[t] = tmp_i[t]
            return
    for t in range(n):
        order[t] = t
    if n > POSITIVES_BY_BUCKETS:  # ties by place: input order
        sort_by_buckets(pos_values, order, count[: min(count.size, n)], tmp_v, tmp_i)
        for t in range(n):
            pos_values[t] = tmp_v[t]
            order[t] = tmp_i[t]
    else:
        sort_pairs(pos_values, order, tmp_v, tmp_i)
    for t in range(n):
        tmp_i[t] = pos_index[order[t]]
    for t in range(n):
        pos_index[t] = tmp_i[t]


#: a 64-bit linear congruential generator (Knuth's MMIX constants) for the pivots' places
_LCG_MUL, _LCG_ADD = np.uint64(6364136223846793005), np.uint64(1442695040888963407)


@jit
def _random_place(lo, n, state):
    """A pseudo-random place in ``lo .. lo+n-1`` (``n`` below 2^32, so that 31 random bits
    times ``n`` fit in 63), and the next state."""
    state = state * _LCG_MUL + _LCG_ADD
    return lo + np.int64(((state >> np.uint64(33)) * n) >> np.uint64(31)), state


@jit
def median_of_three(v, lo, hi, state):
    """Median of three values of ``v[lo..hi]`` at pseudo-random places, and the next state:
    fixed places (first, middle, last) split a sorted or rotated block badly at every level,
    which made the recursion quadratic on sorted input."""
    n = np.uint64(hi - lo + 1)
    i, state = _random_place(lo, n, state)
    j, state = _random_place(lo, n, state)
    k, state = _random_place(lo, n, state)
    a, b, c = v[i], v[j], v[k]
    return max(min(a, b), min(max(a, b), c)), state


@jit
def partition_pairs(v, idx, lo, hi, pivot, strict):
    """Move the values of ``v[lo..hi]`` above ``pivot`` (``strict``) or at least ``pivot``
    to the front, ``idx`` along; return where the rest starts. Branch-free (Lomuto): the
    comparison feeds an index instead of a jump, so random data costs no mispredictions."""
    i = np.uintp(lo)
    for k in range(i, np.uintp(hi + 1)):
        x, ix = v[k], idx[k]
        v[k], idx[k] = v[i], idx[i]
        v[i], idx[i] = x, ix
        i += np.uintp((x > pivot) if strict else (x >= pivot))
    return np.int64(i)
