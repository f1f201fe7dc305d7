"""The small-query route of `qs.inference.batch.lai_batch` (`small_row`).

A small query (fewer than `SMALL_ROW_MAX` negatives), the common case in a mini-batch,
that ``"auto"`` sorts is solved as ``bucket_sort`` does (the negatives sorted by buckets,
then Algorithm 1's divide and conquer on them, AP's sweep past place P) but in the call's
work arrays, with few branches that the input decides: at this size a mispredicted branch
costs more than the arithmetic (its timings beside the other methods:
docs/inference_design.md, "The batch kernels").
"""

import numpy as np

from qs._numba import jit
from qs.inference._hinge import add, score_term
from qs.inference._input import finite_reference
from qs.inference._ranks import opt_ranks_swept
from qs.inference._sorting import sort_positives


@jit
def _sort_few_positives(values, index, p, sorted_values, sorted_index):
    """``values[:p]`` (``index`` along) in descending order into ``sorted_values`` /
    ``sorted_index``, ties in input order: each value's place counted (p^2 comparisons
    without a branch; for p up to `FEW_POSITIVES_MAX`)."""
    for a in range(p):
        x = values[a]
        place = 0
        for b in range(p):
            y = values[b]
            place += (y > x) | ((y == x) & (b < a))
        sorted_values[place] = x
        sorted_index[place] = index[a]


#: positives counted into place (`_sort_few_positives`) up to this many, sorted by buckets
#: above (`_sort_by_buckets`), as the negatives are
FEW_POSITIVES_MAX = 32
#: the default's rows of at least this many negatives go to the kernel of ``lai`` even where
#: they are sorted: `small_row`'s one histogram of two buckets per negative outgrows the
#: cache, where that kernel's sort goes by coarse buckets first
SMALL_ROW_MAX = 1 << 14
#: buckets per negative of the small-query route: two halve the negatives an insertion moves
#: (the branch that mispredicts), for a longer pass over the counts
BUCKETS_PER_NEGATIVE = 2
#: moves per negative the insertion pass of `small_row` may make before it leaves the
#: rest to a merge sort (many distinct scores in one bucket: an outlier stretched the range)
INSERTION_MOVES = 8


@jit
def _insertion_pass(v, idx, size, budget):
    """Insertion sort of ``v[:size]`` (descending, ties keep their order), ``idx`` along;
    False, partly sorted, once it has made more than ``budget`` moves."""
    for a in range(1, size):
        x, ix = v[a], idx[a]
        b = a
        while b > 0 and v[b - 1] < x:
            v[b], idx[b] = v[b - 1], idx[b - 1]
            b -= 1
        v[b], idx[b] = x, ix
        budget -= a - b
        if budget < 0:
            return False
    return True


@jit
def _sort_by_buckets(values, index, size, low, high, bucket, count, sorted_values, sorted_index):
    """``values[:size]`` (``index`` along; all in ``low..high``) in descending order into
    ``sorted_values`` / ``sorted_index``, ties in input order: `BUCKETS_PER_NEGATIVE`
    buckets per value over that range, the values placed by bucket (input order within
    one), then one insertion pass, or a stable merge sort should it move too much.
    ``bucket`` (``size`` long) and ``count`` (`BUCKETS_PER_NEGATIVE` ``size``) are
    scratch."""
    top = BUCKETS_PER_NEGATIVE * size - 1
    scale = (top + 1) / (high - low) if high > low else 0.0
    if not np.isfinite(scale):
        scale = 0.0
    for t in range(size):  # no branch: vectorised
        x = (values[t] - low) * scale  # in 0..top+1 but for rounding (NaN if the range overflows)
        bucket[t] = min(np.int64(x) if x >= 1.0 else 0, top)
    count[: top + 1] = 0
    for t in range(size):
        count[bucket[t]] += 1
    placed = 0
    for t in range(top, -1, -1):  # the highest bucket first; count becomes where each starts
        c = count[t]
        count[t] = placed
        placed += c
    for t in range(size):
        at = count[bucket[t]]
        sorted_values[at] = values[t]
        sorted_index[at] = index[t]
        count[bucket[t]] = at + 1
    if not _insertion_pass(sorted_values, sorted_index, size, INSERTION_MOVES * size):
        order = np.argsort(-sorted_values[:size], kind="mergesort")  # stable: ties keep order
        sorted_values[:size] = sorted_values[:size][order]
        sorted_index[:size] = sorted_index[:size][order]


@jit
def small_row(inc, params, scores, is_pos, p, work, iwork, count, rank, coef, truth_pos, truth_neg):
    """One query of few negatives (finite ``scores``, float64 or float32, read as float64),
    in the work arrays ``work`` (5 rows of n + 2), ``iwork`` (6 rows of n + 2) and ``count``
    (`BUCKETS_PER_NEGATIVE` n + 2); ``rank`` is written at the negatives' input places
    only, ``coef`` (of its dtype) at every place: ``coef(R_bar)`` less ``truth_pos`` at the
    positives and ``truth_neg`` at the negatives (``coef(R*)`` for the gradient, else
    zeros). Returns (the negatives above each positive, the score term ``F(R_bar) -
    F(R*)``, ``F(R*)``).

    Written against the branch predictor (the input decides each branch, and a mispredicted
    one costs as much as a dozen operations): one pass over the scores, without a branch on
    the labels, gathers the positives and the negatives, sums their scores and finds the
    ranges of both; each is sorted by buckets over its range (`_sort_by_buckets`; a few
    positives by counting, `_sort_few_positives`, and very many by `sort_positives`),
    ties in input order; then Algorithm 1's
    divide and conquer, and one pass from the sorted negatives to their ranks and
    coefficients.
    """
    n = scores.size
    m = n - p
    v, sorted_v, pos_values, spos, pos_sorted = work[0], work[1], work[2], work[3], work[4]
    idx, sorted_idx, pos_index, rk, pos_order, bucket = (
        iwork[0],
        iwork[1],
        iwork[2],
        iwork[3],
        iwork[4],
        iwork[5],
    )
    ref = finite_reference(scores, spos, bucket, count)  # all free until the sorts
    sum_pos = 0.0
    sum_neg = 0.0
    low = np.inf
    high = -np.inf
    pos_low = np.inf
    pos_high = -np.inf
    a = 0
    b = 0
    for k in range(n):  # both places written, one of them kept: no branch
        s = np.float64(scores[k])
        pos = is_pos[k] != 0
        pos_values[a] = s
        pos_index[a] = k
        v[b] = s
        idx[b] = k
        a += pos
        b += not pos
        d = s - ref
        sum_pos += d if pos else 0.0  # adding 0.0 changes no sum: F as lai sums it
        sum_neg += 0.0 if pos else d
        low = min(low, np.inf if pos else s)
        high = max(high, -np.inf if pos else s)
        pos_low = min(pos_low, s if pos else np.inf)
        pos_high = max(pos_high, s if pos else -np.inf)
    _sort_by_buckets(v, idx, m, low, high, bucket, count, sorted_v, sorted_idx)
    if p <= FEW_POSITIVES_MAX:
        _sort_few_positives(pos_values, pos_index, p, pos_sorted, pos_order)
    elif p >= SMALL_ROW_MAX:  # one histogram would outgrow the cache: coarse buckets first
        pos_sorted[:p], pos_order[:p] = sort_positives(pos_values[:p], pos_index[:p])
    else:
        _sort_by_buckets(
            pos_values, pos_index, p, pos_low, pos_high, bucket, count, pos_sorted, pos_order
        )
    c2 = 2.0 / (p * m)
    spos[0] = ref
    for i in range(p):
        spos[i + 1] = c2 * (pos_sorted[i] - ref)
    opt_ranks_swept(sorted_v[:m], rk, inc, params, p, c2, spos)
    # as rank_pass and finish: ranks and coefficients of the negatives and the negatives per
    # rank; F summed over the negatives in input order, then over the positives by score
    inv = 1.0 / (p * m)
    count[: p + 2] = 0
    for t in range(m):
        k = sorted_idx[t]
        r = rk[t]
        rank[k] = r
        c = (p + 2 - 2 * r) * inv
        coef[k] = c - truth_neg
        count[r] = t + 1  # ranks ascend: the negatives of rank at most r (a store, no count)
    total, comp = 0.0, 0.0  # the hinge's score term (qs.inference._hinge)
    for t in range(m):  # the negatives as gathered: in input order
        total, comp = add(total, comp, (p + 1 - rank[idx[t]]) * inv * (v[t] - ref))
    n_above = bucket[:p]  # the buckets are read: the row is free
    above = 0
    for k in range(p):
        above = max(above, count[k + 1])
        n_above[k] = above
        c = (m - 2.0 * above) * inv
        coef[pos_order[k]] = c - truth_pos
        total, comp = add(total, comp, -above * inv * (pos_sorted[k] - ref))
    return n_above, score_term(total, comp), sum_pos / p - sum_neg / m
