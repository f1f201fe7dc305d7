"""The passes of the bucket method (`qs.inference.bucket`): the histogram over score
buckets, the ranks of the buckets' corners, the settling pass over the input, and Algorithm 1
on the gathered negatives of the buckets that straddle a rank change; each over a piece of the
input, so that the method can run them on threads."""

import numpy as np

from qs._numba import ONE, jit
from qs.inference._hinge import add
from qs.inference._input import NOT_FINITE, OK
from qs.inference._output import canonical_ties
from qs.inference._ranks import new_stack, opt_ranks_sorted, opt_ranks_unsorted
from qs.inference._sorting import bucket_of, sort_positives
from qs.losses import increment


@jit
def sample_range(scores, n_buckets):
    """(low, scale) laying ``n_buckets`` equal buckets over the range of a strided sample."""
    step = max(1, scores.size // 1024)
    lo = np.inf
    hi = -np.inf
    for k in range(0, scores.size, step):
        s = scores[k]
        if np.isfinite(s):
            lo = min(lo, s)
            hi = max(hi, s)
    if not hi > lo:
        return (lo if np.isfinite(lo) else 0.0), 0.0
    scale = n_buckets / (hi - lo)
    return lo, (scale if np.isfinite(scale) else 0.0)


@jit
def scan_chunk(
    scores, is_pos, lo, hi, low, scale, pos_values, pos_index, p, count, sums, ends, ref, buckets
):
    """Two passes over ``scores[lo:hi]``: the bucket of every score into ``buckets``
    (uint16, kept for `settle_chunk`) and its finiteness, without a branch (the loop
    vectorises); then the positives (written from ``p`` on) and, per bucket, the negatives'
    count (``count``) and sum of ``s - ref`` (``sums``). Split so, the histogram's loop has no
    work of the first pass, and sums per bucket cost little beside the counts, where one sum
    over the negatives waits on every addition. Scores beyond the range the buckets were laid over go to the end
    buckets, whose extreme members go to ``ends`` (smallest and largest of the first bucket,
    then of the last). Returns (error, error_index, sum of the positives' ``s - ref``)."""
    top = np.uintp(count.size - 1)
    finite = True
    for k in range(np.uintp(lo), np.uintp(hi)):
        s = scores[k]
        finite &= np.isfinite(s)
        buckets[k] = bucket_of(s, low, scale, top)
    if not finite:
        for k in range(lo, hi):
            if not np.isfinite(scores[k]):
                return NOT_FINITE, np.int64(k), 0.0
    sum_pos = 0.0
    for k in range(np.uintp(lo), np.uintp(hi)):
        pos = is_pos[k] != 0
        b = np.uintp(buckets[k])
        s = scores[k]
        d = s - ref
        count[b] += np.int32(not pos)
        sums[b] += 0.0 if pos else d
        if pos:
            pos_values[p] = s
            pos_index[p] = k
            p += 1
            sum_pos += d
        elif b == 0 or b == top:
            e = 0 if b == 0 else 2
            ends[e] = min(ends[e], s)
            ends[e + 1] = max(ends[e + 1], s)
    return OK, -1, sum_pos


@jit
def scan_histogram(scores, is_pos, n_pos, n_buckets, ref, buckets):
    """`scan_chunk` over the whole input in one thread, on buckets laid over the range
    of a sample, and the positives sorted. Returns (error, error_index, sum_pos, pos_sorted,
    pos_index, low, scale, count, sums, ends)."""
    low, scale = sample_range(scores, n_buckets)
    pos_values = np.empty(n_pos)
    pos_index = np.empty(n_pos, dtype=np.int64)
    count = np.zeros(n_buckets, dtype=np.int32)  # int32: the histogram stays in cache
    sums = np.zeros(n_buckets)
    ends = np.array([np.inf, -np.inf, np.inf, -np.inf])
    err, where, sum_pos = scan_chunk(
        scores,
        is_pos,
        0,
        scores.size,
        low,
        scale,
        pos_values,
        pos_index,
        0,
        count,
        sums,
        ends,
        ref,
        buckets,
    )
    if err == OK:
        pos_values, pos_index = sort_positives(pos_values, pos_index)
    return err, where, sum_pos, pos_values, pos_index, low, scale, count, sums, ends


@jit
def settled_sums(rank_or_slot, weight_of_rank, sums):
    """(sum of the negatives' ``s - ref``, then the compensated sum of
    ``(w / (P N)) (s - ref)`` over the negatives of the settled buckets as total and
    compensation; ``weight_of_rank``: `rank_weights`), from the buckets' sums."""
    first_slot = weight_of_rank.size
    total = 0.0
    hinge, comp = 0.0, 0.0
    for b in range(sums.size):
        r = rank_or_slot[b]
        total += sums[b]
        hinge, comp = add(hinge, comp, weight_of_rank[r] * sums[b] if r < first_slot else 0.0)
    return total, hinge, comp


@jit
def corners(count, low, scale, ends):
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
def rank_corners(inc, params, count, low, scale, ends, n_pos, spos, n_neg):
    """Rank both corner sequences; settle the buckets whose corners agree.

    Returns (order, first, top_r, bottom_r, rank_or_slot, straddling, starts, rank_count,
    steps): the non-empty buckets in descending score order, and for each its first place and
    corner ranks; ``straddling`` the positions in ``order`` of the buckets whose corners
    differ, and ``starts`` where their negatives start among the gathered ones (one more
    entry: the total); ``rank_or_slot[b]`` the rank of bucket ``b`` when it is settled, else
    ``P + 2 + i`` for the ``i``-th straddling bucket (one table lookup tells both);
    ``rank_count`` the negatives settled per rank. ``steps[i]`` is, for a straddling bucket
    of ranks ``r, r+1``, (``c2 * s+_r``, the loss increment at ``r`` at its first place, at
    its last place) so that `settle_chunk` evaluates the step ``r -> r+1`` exactly as
    `best_rank` does; for a wider one (0, -inf, inf): nothing of it is settled.
    """
    c2 = 2.0 / (n_pos * n_neg)
    order, first, top_s, top_j, bottom_s, bottom_j = corners(count, low, scale, ends)
    n_full = order.size
    top_r = np.empty(n_full, dtype=np.int64)
    bottom_r = np.empty(n_full, dtype=np.int64)
    opt_ranks_sorted(
        top_s, top_r, 0, n_full - 1, 0, top_j, 1, n_pos + 1, inc, params, n_pos, c2, spos
    )
    opt_ranks_sorted(
        bottom_s, bottom_r, 0, n_full - 1, 0, bottom_j, 1, n_pos + 1, inc, params, n_pos, c2, spos
    )
    rank_count = np.zeros(n_pos + 2, dtype=np.int64)
    rank_or_slot = np.zeros(count.size, dtype=np.uint32)  # unsigned: indexes coef_of_rank
    straddling = np.flatnonzero(top_r != bottom_r)
    starts = np.empty(straddling.size + 1, dtype=np.int64)
    n_gather = 0
    i = 0
    for t in range(n_full):
        b = order[t]
        if top_r[t] == bottom_r[t]:
            rank_or_slot[b] = top_r[t]
            rank_count[top_r[t]] += count[b]
        else:
            rank_or_slot[b] = n_pos + 2 + i
            starts[i] = n_gather
            n_gather += count[b]
            i += 1
    starts[i] = n_gather
    steps = np.empty((straddling.size, 3))  # a row per bucket: read together
    for i in range(straddling.size):
        t = straddling[i]
        r = top_r[t]
        if bottom_r[t] == r + 1:
            steps[i, 0] = spos[r]
            steps[i, 1] = increment(inc, first[t] + 1, r, n_pos, params)
            steps[i, 2] = increment(inc, first[t] + count[order[t]], r, n_pos, params)
        else:
            steps[i, 0], steps[i, 1], steps[i, 2] = 0.0, -np.inf, np.inf
    return order, first, top_r, bottom_r, rank_or_slot, straddling, starts, rank_count, steps


@jit
def settle_chunk(
    is_pos,
    lo,
    hi,
    q,
    buckets,
    rank_or_slot,
    weight_of_rank,
    out_of_rank,
    scores,
    c2,
    ref,
    slot_rank,
    steps,
    moved,
    fill,
    g_score,
    g_index,
    g_place,
    neg_rank,
    coef,
):
    """Pass over the negatives ``lo:hi`` (the first of them at place ``q``; ``buckets``:
    their buckets, as `scan_chunk` found them): those of settled buckets get their
    bucket's rank and coefficient, read from tables, their scores unread (the buckets' sums
    give F, `settled_sums`). Those of straddling buckets whose step (``steps``, from
    the rank ``slot_rank`` of the bucket's top corner) is taken at every place of the bucket
    or at none get theirs too; ``moved[i]`` counts those that took it. The others are
    gathered (score, input index, place) at ``fill[i]`` onwards, in input order within a
    bucket. ``coef`` gets ``out_of_rank[r]`` (the coefficient of rank ``r``, shifted, in
    ``coef``'s dtype). Returns the compensated sum (total, compensation) of
    ``(w / (P N)) (s - ref)`` (``weight_of_rank``: `rank_weights`) over the negatives
    of straddling buckets given a rank."""
    first_slot = np.uintp(weight_of_rank.size)  # P + 2: ranks are 1 .. P + 1
    total, comp = 0.0, 0.0
    q = np.uintp(q)
    for k in range(np.uintp(lo), np.uintp(hi)):
        if is_pos[k]:
            continue
        r = np.uintp(rank_or_slot[np.uintp(buckets[k])])
        if r >= first_slot:  # a straddling bucket
            s = scores[k]
            i = r - first_slot
            d = steps[i, 0] - c2 * (s - ref)  # the step's value is d + increment (see best_rank)
            # taken already at the first place: at every place; taken at the last place
            # only: it depends on the place. Combined without branches, as each test is a
            # coin toss for the branch predictor.
            move = d + steps[i, 1] >= 0.0
            if (not move) & (d + steps[i, 2] >= 0.0):  # gathered
                p = fill[i]
                g_score[p], g_index[p], g_place[p] = s, k, q
                fill[i] = p + 1
                q += ONE
                continue
            r = np.uintp(slot_rank[i] + move)
            moved[i] += move
            total, comp = add(total, comp, weight_of_rank[r] * (s - ref))
        neg_rank[q] = r
        coef[k] = out_of_rank[r]
        q += ONE
    return total, comp


@jit
def compact(starts, fill_from, fill_to, g_score, g_index, g_place):
    """Close the gaps the settled members of straddling buckets left among the gathered
    ones: chunk ``c`` filled ``fill_from[c, i] .. fill_to[c, i]-1`` for bucket ``i``, and
    after this the bucket's gathered negatives are the first ``n_live[i]`` from
    ``starts[i]``, still in input order. Returns ``n_live``."""
    n_live = np.empty(starts.size - 1, dtype=np.int64)
    for i in range(n_live.size):
        w = starts[i]
        for c in range(fill_from.shape[0]):
            for p in range(fill_from[c, i], fill_to[c, i]):
                g_score[w], g_index[w], g_place[w] = g_score[p], g_index[p], g_place[p]
                w += 1
        n_live[i] = w - starts[i]
    return n_live


@jit
def solve_gathered(
    inc,
    params,
    i_lo,
    i_hi,
    first,
    top_r,
    bottom_r,
    straddling,
    starts,
    n_live,
    moved,
    g_score,
    g_index,
    g_place,
    n_pos,
    spos,
    n_neg,
    weight_of_rank,
    out_of_rank,
    neg_rank,
    coef,
):
    """Algorithm 1 inside the straddling buckets ``i_lo .. i_hi-1``, each on its own rank
    interval and on the places of its gathered negatives (the first ``n_live[i]`` from
    ``starts[i]``): after those of the members that stayed at the top rank (neither gathered
    nor among the ``moved[i]`` that took the step), which score above them. ``g_score`` is
    partitioned in place and ``idx`` (gather positions, in input order within a bucket)
    moves along and breaks ties. Then the gathered negatives' ranks and coefficients
    (``out_of_rank``, as `settle_chunk` writes them). Returns (the compensated sum of
    ``(w / (P N)) (score - spos[0])`` over them as total and compensation, ``weight_of_rank``:
    `rank_weights`; negatives per rank, those settled in the pass from straddling
    buckets included)."""
    c2 = 2.0 / (n_pos * n_neg)
    stack = new_stack()
    lo_all, hi_all = starts[i_lo], starts[i_hi]
    idx = np.arange(lo_all, hi_all)
    rk = np.empty(hi_all - lo_all, dtype=np.int64)
    v = g_score[lo_all:hi_all]
    rank_count = np.zeros(n_pos + 2, dtype=np.int64)
    total, comp = 0.0, 0.0
    for i in range(i_lo, i_hi):
        t = straddling[i]
        stayed = starts[i + 1] - starts[i] - n_live[i] - moved[i]
        rank_count[top_r[t]] += stayed
        rank_count[top_r[t] + 1] += moved[i]
        lo = starts[i] - lo_all
        hi = lo + n_live[i] - 1
        if hi < lo:
            continue
        if opt_ranks_unsorted(
            v,
            idx,
            rk,
            lo,
            hi,
            first[t] + stayed - lo,
            top_r[t],
            bottom_r[t],
            inc,
            params,
            n_pos,
            c2,
            spos,
            stack,
            0.0,
            -1,
        ):
            canonical_ties(v, idx, rk, lo, hi)
        for p in range(lo, hi + 1):
            g = idx[p]
            r = rk[p]
            neg_rank[g_place[g]] = r
            coef[g_index[g]] = out_of_rank[r]
            total, comp = add(total, comp, weight_of_rank[r] * (v[p] - spos[0]))
            rank_count[r] += 1
    return total, comp, rank_count


@jit
def gathered_arrays(n_gather):
    """Score, input index and place of each of the ``n_gather`` negatives that the
    straddling buckets gather."""
    index = np.empty(n_gather, dtype=np.int64)
    return np.empty(n_gather), index, np.empty_like(index)


@jit
def rank_coefficients(n_pos, n_neg):
    return (n_pos + 2 - 2 * np.arange(n_pos + 2)) * (1.0 / (n_pos * n_neg))


@jit
def rank_weights(n_pos, n_neg):
    """The weight ``(P + 1 - r) / (P N)`` of a negative of rank ``r`` (0 .. P + 1) in the
    hinge's score term (`qs.inference._hinge`): the positives below it."""
    return (n_pos + 1 - np.arange(n_pos + 2)) * (1.0 / (n_pos * n_neg))


@jit
def chunk_fill(count, order, straddling, starts):
    """Per chunk and straddling bucket, where that chunk's negatives of the bucket start:
    after those of the earlier chunks, so that every bucket keeps input order."""
    fill = np.empty((count.shape[0], straddling.size), dtype=np.int64)
    for i in range(straddling.size):
        b = order[straddling[i]]
        at = starts[i]
        for c in range(count.shape[0]):
            fill[c, i] = at
            at += count[c, b]
    return fill
