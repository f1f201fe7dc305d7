"""The pass over the input that the methods start with: finiteness (an error code for the
Python API to raise), the sums of F, the positives, and the negatives gathered with their
places (``bucket`` makes its own pass, which counts them into buckets instead).

Scores are measured from a reference score ``ref`` (`reference`) in the rank
evaluations and in the sums of F: a common offset of all scores cancels in ``s - ref``
before anything is rounded, so ranks and objective do not depend on it (``c2 * s`` at
s = 10^15 + 0.125 rounds away more than the step between two scores). F is unchanged, as
the coefficients sum to 0.
"""

import numpy as np

from qs._numba import ONE, jit, jit_inline
from qs.inference._sorting import median_of_three, sort_positives

# Input errors found inside kernels, as codes turned into messages by the Python API.
OK, NOT_FINITE = 0, 1


@jit
def failed(err, where):
    """The result tuple of a kernel that found bad input."""
    return err, where, 0.0, 0.0, np.empty(0, dtype=np.int64), 0.0


#: how many scores, strided over the input, the reference score is the median of
REFERENCE_SAMPLE = 31


@jit
def reference(scores):
    """The score all others are measured from: the median of a strided sample of them. It
    is one of the scores, near their middle, so that a common offset cancels exactly in
    ``s - ref`` and an outlier (a first score of 10^12) does not inflate every term.

    Found by counting, for each sampled score, the samples below it and at most it (loops
    without branches, where a sort of the sample mispredicts its comparisons). The sample is
    copied out first, so that the counting loops read it contiguously and vectorise. NaN
    scores count as above all others, where a sort puts them; when one is the median, NaN is
    returned (the call fails on it afterwards).
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
def finite_reference(scores, sample, bucket, count):
    """`reference` of finite ``scores`` (the same score, bit for bit), selected by buckets
    rather than by counting against every sampled score: the sample (copied into
    ``sample``) is cut into two buckets per score over its range (``bucket``, ``count``:
    work arrays of at least ``scores.size`` and twice that), the bucket that holds the
    median found from the counts, and the median counted among that bucket's scores only.
    A bucket's scores all lie below the next bucket's (the bucket is monotone in the score),
    so the counts below a score are those of the buckets under it plus its own bucket's;
    and equal scores share a bucket, so the first of the sample's tied medians (the one
    `reference` returns) is the first of its bucket."""
    step = max(1, scores.size // REFERENCE_SAMPLE)
    size = (scores.size + step - 1) // step
    low = np.inf
    high = -np.inf
    for a in range(size):
        x = np.float64(scores[a * step])
        sample[a] = x
        low = min(low, x)
        high = max(high, x)
    top = 2 * size - 1
    scale = (top + 1) / (high - low) if high > low else 0.0
    if not np.isfinite(scale):  # a range that overflows: one bucket
        scale = 0.0
    for a in range(size):
        x = (sample[a] - low) * scale
        bucket[a] = min(np.int64(x) if x >= 1.0 else 0, top)
    count[: top + 1] = 0
    for a in range(size):
        count[bucket[a]] += 1
    half = size // 2
    below = 0
    middle = 0
    while below + count[middle] <= half:
        below += count[middle]
        middle += 1
    for a in range(size):  # the middle bucket's scores, in sample order
        if bucket[a] == middle:
            x = sample[a]
            under = below
            at_most = below
            for b in range(size):
                y = sample[b]
                inside = bucket[b] == middle
                under += inside & (y < x)
                at_most += inside & (y <= x)
            if under <= half < at_most:
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
    `KEY_SHIFT`) into ``v``, ``key``, in input order. Returns (error, error_index,
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
    """`scan_gather` that also splits the negatives around ``pivot``: those above it
    from the front of ``v`` (in input order), the others from its end (in reverse input
    order), so that the divide and conquer starts from a split it did not have to partition
    (`opt_ranks_unsorted`). Branch-free: every negative is written at both ends and
    one end advances; the pass costs what `scan_gather` costs, whose time is the chain
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
    """Undo the order `scan_gather_split` left ``v[i..]`` in (reverse input order):
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
    p, _ = median_of_three(scores, 0, scores.size - 1, np.uint64(scores.size))
    return p


@jit
def scan_and_gather(scores, is_pos, n_pos, out):
    """`scan_input` from the `reference` score, and the negatives' scores written
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
