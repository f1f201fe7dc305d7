"""Kernels shared by the LAI methods.

Notation (Mohapatra et al., CVPR 2018): P positives sorted by descending score ``s+_1 >= ...``;
a negative of score ``s`` at place ``j`` (1-based, among negatives sorted by descending
score) moved from interleaving rank ``i`` to ``i+1`` changes the objective by

    inc_j(i) = 2 (s+_i - s) / (P N) + delta_j(i+1) - delta_j(i).

Every method returns, for each negative, the *largest* maximiser over ranks of the partial
sums of these increments, and evaluates them with the same expression
``spos[i] - c2 * (s - ref) + increment(inc, j, i, P, params)`` (``spos[i] = c2 * (s+_i -
ref)``, ``c2 = 2/(PN)``) so that all methods compare the same floating-point numbers.

Scores are measured from a reference score ``ref`` (:func:`reference`) in the rank
evaluations and in the sums of F: a common offset of all scores cancels in ``s - ref``
before anything is rounded, so ranks and objective do not depend on it (``c2 * s`` at
s = 10^15 + 0.125 rounds away more than the step between two scores). F is unchanged, as
the coefficients sum to 0.

Ties among negatives: the one earlier in the input takes the smaller place ``j`` (so a rank
no larger). Ranks go back to the negatives in one of two ways. ``qs`` and ``bucket`` move
each negative's index along with its score and apply the rule with :func:`canonical_ties`.
The methods that sort scores alone with ``np.sort`` (faster than sorting indices) summarise
the sorted scores as rank segments (:func:`rank_entries`) and give each negative, in input
order, the rank of its score (:func:`assign_by_value`), applying the rule where tied scores
straddle a rank change.
"""

import numpy as np
from numba import types
from numba.extending import overload

from qs._numba import jit, jit_inline
from qs.losses import AP_CODE, increment

# Input errors found inside kernels, as codes turned into messages by the Python API.
OK, NOT_FINITE = 0, 1

#: Unsigned one. numba guards every array access by a signed index against negative
#: indices (a compare and a select, and the registers they hold); the hot loops over the
#: input index with unsigned counters (``range(np.uintp(lo), np.uintp(hi))``, ``q += ONE``)
#: instead, which makes them 25-30% faster. Adding a signed number gives a signed result.
ONE = np.uintp(1)


@jit
def bucket_of(s, low, scale, top):
    """Bucket ``0..top`` of score ``s``: ``floor((s - low) * scale)``, clamped (also for
    scores outside the range the buckets were laid over). Unsigned, so that tables indexed
    by it skip numba's negative-index wraparound (see :data:`ONE`)."""
    x = (s - low) * scale
    if x >= top:
        return np.uintp(top)
    if x >= 1.0:
        return np.uintp(int(x))
    return np.uintp(0)  # also when x is NaN (an overflowed difference times a zero scale)


#: how many scores, strided over the input, the reference score is the median of
REFERENCE_SAMPLE = 31


@jit
def reference(scores):
    """The score all others are measured from: the median of a strided sample of them. It
    is one of the scores, near their middle, so that a common offset cancels exactly in
    ``s - ref`` and an outlier (a first score of 10^12) does not inflate every term.

    Found by counting, for each sampled score, the samples below it and at most it (loops
    without branches): a sort of the sample mispredicted its comparisons and took 1.3 us of
    a 45 us call. The sample is copied out first, so that the counting loops read it
    contiguously and vectorise (counting on the strided input took 2.5x as long: 0.38
    against 0.15 us at 256 or 3312 scores). NaN scores count as above all others, where a
    sort puts them; when one is the median, NaN is returned (the call fails on it
    afterwards).
    """
    step = max(1, scores.size // REFERENCE_SAMPLE)
    sample = np.empty((scores.size + step - 1) // step)
    for a in range(sample.size):
        sample[a] = scores[a * step]
    half = sample.size // 2
    for a in range(sample.size):
        x = sample[a]
        below = 0
        at_most = 0
        for b in range(sample.size):
            y = sample[b]
            below += y < x
            at_most += y <= x
        if below <= half < at_most:
            return x
    return np.nan


@jit_inline
def scan_input(scores, is_pos, n_pos, ref):
    """One pass: finiteness, sums and the positives.

    Returns (error, error_index, sum_pos, sum_neg, pos_sorted, pos_index): the sums of
    ``s - ref``, the positives by descending score, ties in input order.
    """
    pos_values = np.empty(n_pos)
    pos_index = np.empty(n_pos, dtype=np.int64)
    sum_pos = 0.0
    sum_neg = 0.0
    p = 0
    for k in range(scores.size):
        s = scores[k]
        if not np.isfinite(s):
            return NOT_FINITE, k, 0.0, 0.0, pos_values, pos_index
        if is_pos[k]:
            pos_values[p] = s
            pos_index[p] = k
            p += 1
            sum_pos += s - ref
        else:
            sum_neg += s - ref
    pos_sorted, pos_index = sort_positives(pos_values, pos_index)
    return OK, -1, sum_pos, sum_neg, pos_sorted, pos_index


#: a gathered negative's key: its input index in the high 32 bits, its ordinal among the
#: negatives in the low 32 (inputs below 2^32 samples), so that one int64 moves with its
#: score and tells where both its rank and its coefficient go
KEY_SHIFT = np.int64(32)
KEY_LOW = np.int64((1 << 32) - 1)


@jit_inline
def scan_gather(scores, is_pos, ref, pos_values, pos_index, v, key):
    """One pass: finiteness, the sums of ``s - ref``, the positives (score and input index)
    into ``pos_values``, ``pos_index`` and the negatives (score and key, see
    :data:`KEY_SHIFT`) into ``v``, ``key``, in input order. Returns (error, error_index,
    sum_pos, sum_neg)."""
    sum_pos = 0.0
    sum_neg = 0.0
    p = np.uintp(0)
    q = np.uintp(0)
    for k in range(np.uintp(scores.size)):
        s = scores[k]
        if not np.isfinite(s):
            return NOT_FINITE, np.int64(k), 0.0, 0.0
        if is_pos[k]:
            pos_values[p] = s
            pos_index[p] = k
            p += ONE
            sum_pos += s - ref
        else:
            v[q] = s
            key[q] = (np.int64(k) << KEY_SHIFT) | np.int64(q)
            q += ONE
            sum_neg += s - ref
    return OK, -1, sum_pos, sum_neg


@jit_inline
def scan_gather_split(scores, is_pos, ref, pivot, pos_values, pos_index, v, key):
    """:func:`scan_gather` that also splits the negatives around ``pivot``: those above it
    from the front of ``v`` (in input order), the others from its end (in reverse input
    order), so that the divide and conquer starts from a split it did not have to partition
    (:func:`opt_ranks_unsorted`). Branch-free: every negative is written at both ends and
    one end advances; the pass costs what :func:`scan_gather` costs, whose time is the chain
    of additions to the sums. Returns (error, error_index, sum_pos, sum_neg, how many
    negatives are above ``pivot``)."""
    sum_pos = 0.0
    sum_neg = 0.0
    p = np.uintp(0)
    q = np.int64(0)
    front = np.uintp(0)
    back = np.uintp(v.size - 1)  # wraps below 0 after the last negative only: not read then
    for k in range(np.uintp(scores.size)):
        s = scores[k]
        if not np.isfinite(s):
            return NOT_FINITE, np.int64(k), 0.0, 0.0, 0
        if is_pos[k]:
            pos_values[p] = s
            pos_index[p] = k
            p += ONE
            sum_pos += s - ref
        else:
            kq = (np.int64(k) << KEY_SHIFT) | q
            v[front] = s
            key[front] = kq
            v[back] = s
            key[back] = kq
            up = np.uintp(s > pivot)
            front += up
            back -= ONE - up
            q += 1
            sum_neg += s - ref
    return OK, -1, sum_pos, sum_neg, np.int64(front)


@jit_inline
def unsplit(v, key, i):
    """Undo the order :func:`scan_gather_split` left ``v[i..]`` in (reverse input order):
    the negatives are then in input order within each part, and as no value lies in both
    parts, a stable sort of ``v`` orders tied negatives as it would have in input order."""
    a = i
    b = v.size - 1
    while a < b:
        v[a], v[b] = v[b], v[a]
        key[a], key[b] = key[b], key[a]
        a += 1
        b -= 1


@jit_inline
def input_pivot(scores):
    """The first pivot of a divide and conquer over the negatives, chosen before they are
    gathered: the median of three scores at pseudo-random places of the input (a positive's
    score serves as well as a negative's)."""
    p, _ = _median_of_three(scores, 0, scores.size - 1, np.uint64(scores.size))
    return p


#: moves per positive the insertion sort of :func:`sort_positives_hinted` may make, counted
#: from its start with ``HINT_FIRST`` positives' moves in hand: an order unrelated to the
#: scores (the last call's, on other scores of the same sizes) makes about a / 2 moves at the
#: a-th positive and is given up within the first hundred, where a budget for all of them
#: spent 8 P moves first (at P = 5 * 10^5, 42 ns per positive against 28 with no order to
#: start from; 34 now, the check of the order and its gather)
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
    """:func:`sort_positives` in place, starting from the arrangement ``order`` (the positives'
    order of a previous call, as places in input order) and leaving the new one there.

    Inside training the order of the positives changes little from one call to the next
    (median 150-190 exchanges of neighbours among 225 positives on the VOC2011 data, AP), so
    an insertion sort from the previous order takes about P moves, where the merge sort made
    P log P comparisons whose branches the processor cannot predict (6.5 of a 45 us call).
    It gives up past :data:`HINT_MOVES` moves per positive so far (and when ``order`` is not a
    permutation) for :func:`sort_pairs`, or for :func:`sort_by_buckets` (``count``: its
    scratch, at least 16 elements) above :data:`POSITIVES_BY_BUCKETS` positives. Ties go by input order either way: the result does
    not depend on ``order``."""
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


#: most buckets a histogram gets (int32 counts: 256 KB, within a core's L2 cache)
MAX_BUCKETS = 1 << 16


#: runs this long are sorted by insertion before :func:`sort_pairs` merges them
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
                if b < hi and (a >= mid or src_v[b] > src_v[a]
                               or (src_v[b] == src_v[a] and src_i[b] < src_i[a])):
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


#: buckets larger than this are sorted by merge sort instead of insertion
INSERTION_MAX = 32
#: the buckets are laid over the range of this many scores, strided
RANGE_SAMPLE = 1024


#: from this many scores on, :func:`sort_by_buckets` first scatters them into
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
    key: the buckets of more than :data:`INSERTION_MAX` scores by :func:`sort_pairs` through
    the scratch arrays, the others by insertion, each alone or (``one_pass``) by one
    insertion sort of the whole of ``v``, which moves each score only within its bucket
    (none in the buckets sorted already). Sorting each small bucket alone tests its size at
    every bucket, a test the processor mispredicts at about every one; the one pass saves
    that on the fine buckets of :func:`sort_by_buckets`' second level (5% of the sort from
    2^17 scores), and costs 6-8% more on its single level (10^5 scores)."""
    lo = 0
    for b in range(ends.size - 1, -1, -1):
        hi = ends[b]
        m = hi - lo
        if m > INSERTION_MAX:
            sort_pairs(v[lo:hi], key[lo:hi], tmp_v[lo:hi], tmp_key[lo:hi])
        elif m > 1 and not one_pass:
            _sort_pairs_descending(v, key, lo, hi - 1)
        lo = hi
    if one_pass:
        _sort_pairs_descending(v, key, 0, v.size - 1)


@jit_inline
def sort_by_buckets(v, key, count, v_sorted, key_sorted):
    """The scores ``v`` (keys ``key``, input order) in descending order into ``v_sorted``,
    ``key_sorted``, by buckets (about one per score); ties keep input order (a key order
    that follows input order). ``count``: the histogram's scratch (one element per bucket);
    ``v`` and ``key`` are scratch once read. From :data:`TWO_LEVEL_MIN` scores on (and
    ``count`` of at least 4 :data:`COARSE_BUCKETS`), coarse buckets first, each then sorted
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


@jit_inline
def rank_pass(v, key, rk, n_pos, scores, is_pos, neg_rank, coef, ref, rank_count):
    """Ranks of the negatives from a working array (scores ``v``, keys ``key`` as
    :func:`scan_gather` writes them, ranks ``rk``), written straight to their places, and the
    negatives per rank into ``rank_count`` (P + 2 elements, zeroed here); then, in input order,
    their coefficients and the sum of coef * (score - ref) over them, in input order as every
    method sums it (so that their objectives agree to the last bit, and the solvers' iterates
    with them). Only the int32 ranks are scattered: scattering the float64 coefficients too
    took twice the time from 10^6 negatives on, where the writes miss the cache. The pass in
    input order has no branch on the labels, which mispredicted at each positive: it writes
    a coefficient at every sample, the positives' overwritten by :func:`finish`.
    """
    n_neg = v.size
    for r in range(rank_count.size):
        rank_count[r] = 0
    for p in range(np.uintp(n_neg)):
        r = rk[p]
        neg_rank[np.uintp(key[p] & KEY_LOW)] = r
        rank_count[np.uintp(r)] += 1
    inv = 1.0 / (n_pos * n_neg)
    dot = 0.0
    q = np.uintp(0)
    last = np.uintp(n_neg - 1)
    for k in range(np.uintp(scores.size)):
        pos = is_pos[k] != 0
        c = (n_pos + 2 - 2 * neg_rank[min(q, last)]) * inv
        coef[k] = c
        dot += 0.0 if pos else c * (scores[k] - ref)
        q += ONE - np.uintp(pos)
    return dot


#: above this many positives, they are sorted by buckets (:func:`sort_by_buckets`, O(P)
#: expected) rather than by merge sort (O(P log P), its comparisons mispredicted): 47 of a
#: 62 ms call at P = 2 * 10^5, N = 10^6 went to the merge sort
POSITIVES_BY_BUCKETS = 256


@jit
def sort_positives(pos_values, pos_index):
    """The positives by descending score, ties in input order (``pos_index`` ascending)."""
    n = pos_values.size
    if n > POSITIVES_BY_BUCKETS:
        pos_sorted, pos_order = np.empty(n), np.empty(n, dtype=np.int64)
        sort_by_buckets(pos_values.copy(), pos_index.copy(),
                        np.empty(min(MAX_BUCKETS, n), dtype=np.int64), pos_sorted, pos_order)
        return pos_sorted, pos_order
    pos_sorted, pos_order = pos_values.copy(), pos_index.copy()
    sort_pairs(pos_sorted, pos_order, np.empty(n), np.empty(n, dtype=np.int64))
    return pos_sorted, pos_order


@jit
def finish(rank_count, dot_neg, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg, ref):
    """Coefficients of the positives from the negatives per rank; the result tuple
    (OK, -1, sum_pos, sum_neg, negatives above each positive, F). ``dot_neg``: the sum of
    coef * (score - ref) over the negatives."""
    n_pos = pos_sorted.size
    n_above = np.empty(n_pos, dtype=np.int64)
    inv = 1.0 / (n_pos * n_neg)
    dot = dot_neg
    above = rank_count[0]
    for k in range(n_pos):
        above += rank_count[k + 1]
        n_above[k] = above
        c = (n_neg - 2.0 * above) * inv
        coef[pos_index[k]] = c
        dot += c * (pos_sorted[k] - ref)
    return OK, -1, sum_pos, sum_neg, n_above, dot


@jit
def failed(err, where):
    """The result tuple of a kernel that found bad input."""
    return err, where, 0.0, 0.0, np.empty(0, dtype=np.int64), 0.0


@jit
def scan_and_gather(scores, is_pos, n_pos, out):
    """:func:`scan_input` from the :func:`reference` score, and the negatives' scores written
    into ``out`` (input order). Returns (error, error_index, sum_pos, sum_neg, pos_sorted,
    pos_index, ref)."""
    ref = reference(scores)
    err, where, sum_pos, sum_neg, pos_sorted, pos_index = scan_input(scores, is_pos, n_pos, ref)
    if err == OK:
        q = 0
        for k in range(scores.size):
            if not is_pos[k]:
                out[q] = scores[k]
                q += 1
    return err, where, sum_pos, sum_neg, pos_sorted, pos_index, ref


#: how many of the gathered negatives :func:`settled_share` reads (strided): enough to tell
#: a share above one half (training, ties) from one near 0 (random scores). Measured inside
#: training (replayed vectors, phoning, AP): 64 cost 0.3-0.6 us of the default's 35 us
#: against ``qs`` called directly, 16 nothing measurable
SHARE_SAMPLE = 16


@jit_inline
def settled_share(v, lowest):
    """The share of the negatives ``v`` that score at most ``lowest`` (the lowest positive),
    on a strided sample of :data:`SHARE_SAMPLE` of them. Read from the gathered negatives,
    which are in cache: read from the input before the pass over it, the same sample missed
    the cache at each run of samples (4 us of a 50 us call inside training)."""
    step = max(1, v.size // SHARE_SAMPLE)
    settled = 0
    total = 0
    for k in range(0, v.size, step):
        settled += v[k] <= lowest
        total += 1
    return settled / total


@jit_inline
def best_rank(inc, params, n_pos, c2, spos, s, j, lo, hi):
    """Largest maximiser over ranks ``lo..hi`` of the objective of one negative (score s, place j);
    ``spos[0]`` is the reference score (see :func:`positive_steps`)."""
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


#: rank intervals at least this wide are cut by :func:`score_cap` (narrower ones cost it more
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
    """:func:`best_rank`, the same rank, with fewer evaluations for the built-in losses.

    From the first rank ``U`` whose positive does not score above the negative, every
    increment is negative (a score term ``spos[i] - cs <= 0`` plus a negative loss
    increment, also in floating point), so the gain never returns to 0 there: the largest
    maximiser is at most ``U``, and the search stops at it (:func:`score_cap`). It pays on
    the wide rank intervals of the divide and conquer's first levels, whose blocks span the
    ranks of all their places (from :data:`CAP_MIN` ranks on): 2-10% of the rank step's
    time at shares of positives of 0.05 to 0.5, N = 10^5 and 10^6."""
    if negative_increments(inc) and hi - lo > CAP_MIN:
        hi = score_cap(spos, c2 * (s - spos[0]), lo, hi)
    return best_rank(inc, params, n_pos, c2, spos, s, j, lo, hi)


@jit
def _sort_pairs_descending(v, idx, lo, hi):
    """Insertion sort of ``v[lo..hi]`` (descending), moving ``idx`` along."""
    first = np.uintp(lo)
    for a in range(first + ONE, np.uintp(hi + 1)):
        x, ix = v[a], idx[a]
        b = a  # the hole
        while b > first and v[b - ONE] < x:
            v[b], idx[b] = v[b - ONE], idx[b - ONE]
            b -= ONE
        v[b], idx[b] = x, ix


#: a 64-bit linear congruential generator (Knuth's MMIX constants) for the pivots' places
_LCG_MUL, _LCG_ADD = np.uint64(6364136223846793005), np.uint64(1442695040888963407)


@jit
def _random_place(lo, n, state):
    """A pseudo-random place in ``lo .. lo+n-1`` (``n`` below 2^32, so that 31 random bits
    times ``n`` fit in 63), and the next state."""
    state = state * _LCG_MUL + _LCG_ADD
    return lo + np.int64(((state >> np.uint64(33)) * n) >> np.uint64(31)), state


@jit
def _median_of_three(v, lo, hi, state):
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
def _partition_pairs(v, idx, lo, hi, pivot, strict):
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


@jit
def opt_ranks_sorted(v, rk, lo, hi, j_offset, places, r_lo, r_hi, inc, params, n_pos, c2, spos):
    """The divide and conquer of Algorithm 1 on scores already in descending order.

    ``v[lo..hi]`` are the negatives of places ``j_offset+1 ..``, or, when ``places`` is an
    array, points (score, place) with places ``places[lo..hi]``. Writes each rank in ``rk``.
    Each block goes on to its left half at once and keeps only a non-empty right half on the
    stack (at most one per level); a block of one rank is filled by a loop. The same rank
    evaluations as pushing both halves, with fewer stack moves and branches (4-5% less time
    on 10 queries of about 230 negatives and 26 positives).
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
            if places is None:
                j = j_offset + m + 1
            else:
                j = places[m]
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
    arXiv:1604.08269, Proposition 5; DESIGN.md); :data:`NO_PLACE` for the other losses."""
    return n_pos if isinstance(inc, int) and inc == AP_CODE else NO_PLACE


@overload(concave_place, inline="always")
def _concave_place_numba(inc, n_pos):
    if isinstance(inc, types.Integer):
        return lambda inc, n_pos: np.int64(n_pos) if inc == AP_CODE else NO_PLACE
    return lambda inc, n_pos: NO_PLACE


@jit_inline
def opt_ranks_swept(v, rk, inc, params, n_pos, c2, spos):
    """The ranks of all negatives ``v`` (descending: places 1 .. N) into ``rk``: Algorithm 1's
    divide and conquer (:func:`opt_ranks_sorted`) above the place :func:`concave_place`,
    and from it on a monotone sweep.

    Where a negative's objective is concave in the rank, its largest maximiser is the first
    rank whose increment is negative (:func:`best_rank` finds the same: its gain resets at
    every non-negative increment and only falls after the first negative one), and the ranks
    are non-decreasing in the place: each negative goes on from the rank of the one before,
    O(N + P) rank evaluations in all, where the divide and conquer makes about P log N.
    """
    n = v.size
    j0 = concave_place(inc, n_pos)
    if j0 > n:
        opt_ranks_sorted(v, rk, 0, n - 1, 0, None, 1, n_pos + 1, inc, params, n_pos, c2, spos)
        return
    m0 = j0 - 1
    r = best_rank_capped(inc, params, n_pos, c2, spos, v[m0], j0, 1, n_pos + 1)
    rk[m0] = r
    if m0 > 0:
        opt_ranks_sorted(v, rk, 0, m0 - 1, 0, None, 1, r, inc, params, n_pos, c2, spos)
    ref = spos[0]
    for m in range(m0 + 1, n):
        cs = c2 * (v[m] - ref)
        while r <= n_pos and spos[r] - cs + increment(inc, m + 1, r, n_pos, params) >= 0.0:
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
def opt_ranks_unsorted(v, idx, rk, lo, hi, j_offset, r_lo, r_hi, inc, params, n_pos, c2, spos,
                       stack, pivot, split):
    """Algorithm 1 of Mohapatra et al., CVPR 2018 (OptRanks) on the unsorted block ``v[lo..hi]``
    (the negatives of places ``j_offset+1 ..``), whose ranks lie in ``r_lo..r_hi``.

    As in quicksort, each block is split once around a pivot value ``p`` (median of three at
    pseudo-random places) rather than at its exact median: the block's part above ``p`` has
    ranks at most ``r(p, last place of that part)``, the rest at least ``r(p, first place of
    it)``, so two rank evaluations split the rank interval. When nothing is above ``p``, the
    values equal to it form a sorted block of their own (``p`` need not be one of the values:
    the bounds hold for any ``p``). Small blocks are sorted and split at their middle
    element. ``idx`` moves with ``v``; ``rk`` receives the rank at each position,
    non-decreasing along ``v`` at the end. ``stack`` is scratch space from :func:`new_stack`.
    ``split``: -1, or where the block, already split around ``pivot``, starts its part at
    most ``pivot`` (``v[lo..split-1] > pivot >= v[split..hi]``, as :func:`scan_gather_split`
    leaves the negatives): the first split, made for free.

    Returns whether equal values may have been given different ranks, which
    :func:`canonical_ties` then settles: a split around a pivot never separates equal values,
    so only a sorted block holding equal values can.
    """
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3], stack[0, 4] = lo, hi, r_lo, r_hi, 0
    top = 1
    state = np.uint64(lo + hi)  # the pivots' places: pseudo-random, the same on every run
    tied = False
    while top > 0:
        top -= 1
        a, b, ra, rb, is_sorted = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3], stack[top, 4]
        given, split = split, -1  # the first block's split, when given
        if a > b:
            continue
        if ra == rb:  # unsigned (see ONE): the fill vectorises, 5x faster
            for t in range(np.uintp(a), np.uintp(b + 1)):
                rk[t] = ra
            continue
        if not is_sorted and b - a < 24:
            _sort_pairs_descending(v, idx, a, b)
            is_sorted = 1
            tied |= _has_equal_neighbours(v, a, b)
        if is_sorted:
            m = (a + b) >> 1
            rm = best_rank_capped(inc, params, n_pos, c2, spos, v[m], j_offset + m + 1, ra,
                                  rb)
            rk[m] = rm
            first, second = (a, m - 1, ra, rm, 1), (m + 1, b, rm, rb, 1)
        else:
            if given >= 0:
                p, i = pivot, given
            else:
                p, state = _median_of_three(v, a, b, state)
                i = _partition_pairs(v, idx, a, b, p, True)  # v[a..i-1] > p >= v[i..b]
            above_sorted = 0
            r_above = ra
            if i > a:
                r_above = best_rank_capped(inc, params, n_pos, c2, spos, p, j_offset + i, ra,
                                           rb)
            else:  # nothing above p: the values equal to p come first, a sorted block
                i = _partition_pairs(v, idx, a, b, p, False)  # v[a..i-1] == p > v[i..b]
                above_sorted = 1
                tied |= i - a > 1
            r_below = best_rank_capped(inc, params, n_pos, c2, spos, p, j_offset + i + 1,
                                       r_above, rb)
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


#: the shape of :func:`new_stack`'s array, and its number of elements
STACK_SHAPE = (200, 5)
STACK_SIZE = STACK_SHAPE[0] * STACK_SHAPE[1]


@jit
def new_stack():
    """Scratch space for :func:`opt_ranks_unsorted`: it keeps the smaller part of each split on
    top, so at most about 2 log2(block) entries are held."""
    return np.empty(STACK_SHAPE, dtype=np.int64)


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

    ``bin(s) = floor((top - s) * scale)`` clamped to ``0..last`` (:func:`bucket_of` of
    ``-s``) is monotone in ``s`` (in floating point too), so every segment before ``start[t]`` (the first whose smallest score falls in a bin
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
    :func:`rank_entries`; descending) that holds its score.

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


@jit
def positive_steps(pos_sorted, c2, ref):
    """``spos[i] = c2 * (s+_i - ref)`` (1-based); ``spos[0] = ref``, the reference score,
    so that the rank evaluations that take ``spos`` also know it."""
    spos = np.empty(pos_sorted.size + 1)
    spos[0] = ref
    for i in range(pos_sorted.size):
        spos[i + 1] = c2 * (pos_sorted[i] - ref)
    return spos


@jit
def positive_steps_into(pos_sorted, c2, ref, spos):
    """:func:`positive_steps` written into ``spos`` (P + 1 elements)."""
    spos[0] = ref
    for i in range(pos_sorted.size):
        spos[i + 1] = c2 * (pos_sorted[i] - ref)


@jit_inline
def negative_coefficients_into(scores, is_pos, neg_rank, n_pos, n_neg, coef, ref, rank_count):
    """:func:`negative_coefficients` counting into ``rank_count`` (P + 2 elements, zeroed
    here); returns the sum."""
    for r in range(rank_count.size):
        rank_count[r] = 0
    inv = 1.0 / (n_pos * n_neg)
    dot = 0.0
    q = np.uintp(0)
    for k in range(scores.size):
        if is_pos[k]:
            continue
        r = neg_rank[q]
        c = (n_pos + 2 - 2 * r) * inv
        coef[k] = c
        dot += c * (scores[k] - ref)
        rank_count[np.uintp(r)] += 1
        q += ONE
    return dot


@jit_inline
def negative_coefficients(scores, is_pos, neg_rank, n_pos, n_neg, coef, ref):
    """Fill the negatives' ``coef`` from their ranks; return (negatives per rank, sum of
    coef * (score - ref) over the negatives)."""
    rank_count = np.empty(n_pos + 2, dtype=np.int64)
    dot = negative_coefficients_into(scores, is_pos, neg_rank, n_pos, n_neg, coef, ref,
                                     rank_count)
    return rank_count, dot


@jit
def finish_working(v, rk, scores, is_pos, n_pos, n_neg, neg_rank, coef, ref):
    """Ranks found on the sorted scores ``v`` given back to the negatives by value, in input
    order; then :func:`negative_coefficients`."""
    n_ent = min(n_pos + 1, v.size)
    ent_rank = np.empty(n_ent, dtype=np.int64)
    ent_lo = np.empty(n_ent)
    ent_hi = np.empty(n_ent)
    ent_eq_lo = np.empty(n_ent, dtype=np.int64)
    ent_eq_hi = np.empty(n_ent, dtype=np.int64)
    n_ent = rank_entries(v, rk, 0, v.size - 1, ent_rank, ent_lo, ent_hi, ent_eq_lo, ent_eq_hi, 0)
    assign_by_value(scores, is_pos, ent_rank[:n_ent], ent_lo[:n_ent], ent_hi[:n_ent],
                    ent_eq_lo[:n_ent], ent_eq_hi[:n_ent], neg_rank)
    return negative_coefficients(scores, is_pos, neg_rank, n_pos, n_neg, coef, ref)
