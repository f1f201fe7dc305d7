"""Exact LAI by bucketing negatives on their scores: the default method.

The optimal rank ``r(s, j)`` of a negative is non-increasing in its score ``s`` and
non-decreasing in its place ``j`` (DESIGN.md). One histogram pass puts the negatives in
equal-width score buckets, which gives each bucket its places ``J+1 .. J+c``. A bucket's
members lie between its top corner (its upper edge at place ``J+1``) and its bottom corner
(its lower edge at place ``J+c``); when the two corners get the same rank, every member gets
it, unsorted. Top corners are monotone along the buckets, and so are bottom corners, so the
divide and conquer of Algorithm 1 ranks each sequence. The buckets whose corners differ
(about one per rank change, so about P) straddle a rank change. When their corners differ by
one rank, ``r`` or ``r+1``, a member moves to ``r+1`` at every place of the bucket or at none
of them (the objective's step is monotone in the place), except in a narrow band of scores:
the pass settles those members by two comparisons, and gathers only the band. The other
straddling buckets are gathered whole. Gathered negatives are solved by Algorithm 1 within
their bucket's places and rank interval.

No comparison sort of the negatives: O(N + B + P log B) plus Algorithm 1 on the gathered
negatives, for B buckets. The paper's Omega(N log P) lower bound holds for comparison-based
methods only.

The histogram pass keeps each score's bucket (uint16: at most :data:`MAX_BUCKETS` = 2^16
buckets) and the sum of the negatives' scores per bucket, so that the settling pass reads
no score of a settled bucket: a table lookup gives its members' rank and coefficient, and
F's share of them comes from the bucket's sum. Measured on one row of 10^5 scores, 0.1%
positives (AP, one thread): the method took 318 us, against 433 us when the settling pass
found each bucket again and summed coefficient times score, one addition waiting on the
last. The coefficients may be written shifted and in float32 (a gradient ``coef(R_bar) -
coef(R*)``, :func:`_bucket`), with no pass of their own.

The passes over the input (histogram, then settling) and the gathered buckets are cut into
pieces that run on threads for large inputs. The pieces depend on the input size only, not
on the number of threads, so the result does too.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from qs._numba import ONE, bind, jit
from qs.inference._input import NOT_FINITE, OK, failed, reference
from qs.inference._output import canonical_ties, finish
from qs.inference._ranks import new_stack, opt_ranks_sorted, opt_ranks_unsorted, positive_steps
from qs.inference._sorting import MAX_BUCKETS, bucket_of, sort_positives
from qs.losses import increment

#: inputs with at least this many samples are cut into ``CHUNKS`` pieces run on threads
#: (measured on 2 cores: no gain up to ~3 * 10^6 samples, 151 -> 108 ms at 10^7)
THREADED_MIN = 1 << 21
CHUNKS = 8


@jit
def _sample_range(scores, n_buckets):
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
def _scan_chunk(scores, is_pos, lo, hi, low, scale, pos_values, pos_index, p, count, sums, ends,
                ref, buckets):
    """Two passes over ``scores[lo:hi]``: the bucket of every score into ``buckets``
    (uint16, kept for :func:`_settle_chunk`) and its finiteness, without a branch (the loop
    vectorises); then the positives (written from ``p`` on) and, per bucket, the negatives'
    count (``count``) and sum of ``s - ref`` (``sums``). Split so, the histogram took half
    the time of one pass that also found the buckets (49 against 92 us on 10^5 scores), and
    sums per bucket cost little beside the counts, where one sum over the negatives waits on
    every addition (82 us). Scores beyond the range the buckets were laid over go to the end
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
    """:func:`_scan_chunk` over the whole input in one thread, on buckets laid over the range
    of a sample, and the positives sorted. Returns (error, error_index, sum_pos, pos_sorted,
    pos_index, low, scale, count, sums, ends)."""
    low, scale = _sample_range(scores, n_buckets)
    pos_values = np.empty(n_pos)
    pos_index = np.empty(n_pos, dtype=np.int64)
    count = np.zeros(n_buckets, dtype=np.int32)  # int32: the histogram stays in cache
    sums = np.zeros(n_buckets)
    ends = np.array([np.inf, -np.inf, np.inf, -np.inf])
    err, where, sum_pos = _scan_chunk(scores, is_pos, 0, scores.size, low, scale, pos_values,
                                      pos_index, 0, count, sums, ends, ref, buckets)
    if err == OK:
        pos_values, pos_index = sort_positives(pos_values, pos_index)
    return err, where, sum_pos, pos_values, pos_index, low, scale, count, sums, ends


@jit
def _settled_sums(rank_or_slot, coef_of_rank, sums):
    """(sum of the negatives' ``s - ref``, sum of coefficient times ``s - ref`` over the
    negatives of the settled buckets), from the buckets' sums."""
    first_slot = coef_of_rank.size
    total = 0.0
    dot = 0.0
    for b in range(sums.size):
        r = rank_or_slot[b]
        total += sums[b]
        dot += coef_of_rank[r] * sums[b] if r < first_slot else 0.0
    return total, dot


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
def _rank_corners(inc, params, count, low, scale, ends, n_pos, spos, n_neg):
    """Rank both corner sequences; settle the buckets whose corners agree.

    Returns (order, first, top_r, bottom_r, rank_or_slot, straddling, starts, rank_count,
    steps): the non-empty buckets in descending score order, and for each its first place and
    corner ranks; ``straddling`` the positions in ``order`` of the buckets whose corners
    differ, and ``starts`` where their negatives start among the gathered ones (one more
    entry: the total); ``rank_or_slot[b]`` the rank of bucket ``b`` when it is settled, else
    ``P + 2 + i`` for the ``i``-th straddling bucket (one table lookup tells both);
    ``rank_count`` the negatives settled per rank. ``steps[i]`` is, for a straddling bucket
    of ranks ``r, r+1``, (``c2 * s+_r``, the loss increment at ``r`` at its first place, at
    its last place) so that :func:`_settle_chunk` evaluates the step ``r -> r+1`` exactly as
    :func:`best_rank` does; for a wider one (0, -inf, inf): nothing of it is settled.
    """
    c2 = 2.0 / (n_pos * n_neg)
    order, first, top_s, top_j, bottom_s, bottom_j = _corners(count, low, scale, ends)
    n_full = order.size
    top_r = np.empty(n_full, dtype=np.int64)
    bottom_r = np.empty(n_full, dtype=np.int64)
    opt_ranks_sorted(top_s, top_r, 0, n_full - 1, 0, top_j, 1, n_pos + 1, inc, params, n_pos, c2, spos)
    opt_ranks_sorted(bottom_s, bottom_r, 0, n_full - 1, 0, bottom_j, 1, n_pos + 1, inc, params,
                     n_pos, c2, spos)
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
def _settle_chunk(is_pos, lo, hi, q, buckets, rank_or_slot, coef_of_rank, out_of_rank, scores,
                  c2, ref, slot_rank, steps, moved, fill, g_score, g_index, g_place, neg_rank,
                  coef):
    """Pass over the negatives ``lo:hi`` (the first of them at place ``q``; ``buckets``:
    their buckets, as :func:`_scan_chunk` found them): those of settled buckets get their
    bucket's rank and coefficient, read from tables, their scores unread (the buckets' sums
    give F, :func:`_settled_sums`). Those of straddling buckets whose step (``steps``, from
    the rank ``slot_rank`` of the bucket's top corner) is taken at every place of the bucket
    or at none get theirs too; ``moved[i]`` counts those that took it. The others are
    gathered (score, input index, place) at ``fill[i]`` onwards, in input order within a
    bucket. ``coef`` gets ``out_of_rank[r]`` (the coefficient of rank ``r``, shifted, in
    ``coef``'s dtype). Returns the sum of coefficient (``coef_of_rank``) times ``s - ref``
    over the negatives of straddling buckets given a rank."""
    first_slot = np.uintp(coef_of_rank.size)  # P + 2: ranks are 1 .. P + 1
    dot = 0.0
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
            dot += coef_of_rank[r] * (s - ref)
        neg_rank[q] = r
        coef[k] = out_of_rank[r]
        q += ONE
    return dot


@jit
def _compact(starts, fill_from, fill_to, g_score, g_index, g_place):
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
def _solve_gathered(inc, params, i_lo, i_hi, first, top_r, bottom_r, straddling, starts, n_live,
                    moved, g_score, g_index, g_place, n_pos, spos, n_neg, coef_of_rank, out_of_rank,
                    neg_rank, coef):
    """Algorithm 1 inside the straddling buckets ``i_lo .. i_hi-1``, each on its own rank
    interval and on the places of its gathered negatives (the first ``n_live[i]`` from
    ``starts[i]``): after those of the members that stayed at the top rank (neither gathered
    nor among the ``moved[i]`` that took the step), which score above them. ``g_score`` is
    partitioned in place and ``idx`` (gather positions, in input order within a bucket)
    moves along and breaks ties. Then the gathered negatives' ranks and coefficients
    (``out_of_rank``, as :func:`_settle_chunk` writes them). Returns (sum of coefficient times (score - spos[0]) over them, negatives per rank, those
    settled in the pass from straddling buckets included)."""
    c2 = 2.0 / (n_pos * n_neg)
    stack = new_stack()
    lo_all, hi_all = starts[i_lo], starts[i_hi]
    idx = np.arange(lo_all, hi_all)
    rk = np.empty(hi_all - lo_all, dtype=np.int64)
    v = g_score[lo_all:hi_all]
    rank_count = np.zeros(n_pos + 2, dtype=np.int64)
    dot = 0.0
    for i in range(i_lo, i_hi):
        t = straddling[i]
        stayed = starts[i + 1] - starts[i] - n_live[i] - moved[i]
        rank_count[top_r[t]] += stayed
        rank_count[top_r[t] + 1] += moved[i]
        lo = starts[i] - lo_all
        hi = lo + n_live[i] - 1
        if hi < lo:
            continue
        if opt_ranks_unsorted(v, idx, rk, lo, hi, first[t] + stayed - lo, top_r[t],
                              bottom_r[t], inc, params, n_pos, c2, spos, stack, 0.0, -1):
            canonical_ties(v, idx, rk, lo, hi)
        for p in range(lo, hi + 1):
            g = idx[p]
            r = rk[p]
            neg_rank[g_place[g]] = r
            coef[g_index[g]] = out_of_rank[r]
            dot += coef_of_rank[r] * (v[p] - spos[0])
            rank_count[r] += 1
    return dot, rank_count


@jit
def _gathered_arrays(n_gather):
    """Score, input index and place of each of the ``n_gather`` negatives that the
    straddling buckets gather."""
    index = np.empty(n_gather, dtype=np.int64)
    return np.empty(n_gather), index, np.empty_like(index)


@jit
def _coef_of_rank(n_pos, n_neg):
    return (n_pos + 2 - 2 * np.arange(n_pos + 2)) * (1.0 / (n_pos * n_neg))


@jit
def _bucket(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef, shift_pos, shift_neg,
            buckets):
    """The whole method in one thread. ``coef`` (float64 or float32) gets each coefficient
    less ``shift_pos`` at a positive and ``shift_neg`` at a negative, rounded once to its
    dtype: a gradient ``coef(R_bar) - coef(R*)`` written with no pass of its own.
    ``buckets``: a uint16 work array of at least ``scores.size`` (allocated here if
    shorter)."""
    n_neg = scores.size - n_pos
    ref = reference(scores)
    if buckets.size < scores.size:
        buckets = np.empty(scores.size, dtype=np.uint16)
    err, where, sum_pos, pos_sorted, pos_index, low, scale, count, sums, ends = (
        scan_histogram(scores, is_pos, n_pos, n_buckets, ref, buckets))
    if err != OK:
        return failed(err, where)
    c2, spos = positive_steps(pos_sorted, n_neg, ref)
    order, first, top_r, bottom_r, rank_or_slot, straddling, starts, rank_count, steps = (
        _rank_corners(inc, params, count, low, scale, ends, n_pos, spos, n_neg))
    coef_of_rank = _coef_of_rank(n_pos, n_neg)
    out_of_rank = coef_of_rank - shift_neg
    sum_neg, dot = _settled_sums(rank_or_slot, coef_of_rank, sums)
    g_score, g_index, g_place = _gathered_arrays(starts[-1])
    fill_from = starts[:-1].copy().reshape((1, straddling.size))
    fill = fill_from.copy()
    moved = np.zeros(straddling.size, dtype=np.int64)
    dot += _settle_chunk(is_pos, 0, scores.size, 0, buckets, rank_or_slot, coef_of_rank,
                         out_of_rank, scores, c2, ref, top_r[straddling], steps, moved, fill[0],
                         g_score, g_index, g_place, neg_rank, coef)
    n_live = _compact(starts, fill_from, fill, g_score, g_index, g_place)
    dot_g, count_g = _solve_gathered(inc, params, 0, straddling.size, first, top_r, bottom_r,
                                     straddling, starts, n_live, moved, g_score, g_index, g_place,
                                     n_pos, spos, n_neg, coef_of_rank, out_of_rank, neg_rank, coef)
    return finish(rank_count + count_g, dot + dot_g, pos_sorted, pos_index, n_neg, coef,
                  sum_pos, sum_neg, ref, shift_pos)


@jit
def _chunk_fill(count, order, straddling, starts):
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


_pool = {}  # (process id, workers) -> pool: a forked child starts its own threads


def thread_count():
    """numba's configured thread count (``NUMBA_NUM_THREADS``), read without launching its
    threading layer: launching the OpenMP layer sets the OpenMP thread count of the whole
    process, torch's included (a torch limited to one thread went back to all cores, and
    its reductions on 6.4 * 10^6 scores from 0.1 to 8 ms)."""
    return numba.config.NUMBA_NUM_THREADS


def _map(fn, *iterables):
    """``fn`` over the pieces on a pool of :func:`thread_count` threads (the kernels release
    the GIL)."""
    workers = max(1, min(CHUNKS, thread_count(), os.cpu_count() or 1))
    if workers == 1:
        return list(map(fn, *iterables))
    key = (os.getpid(), workers)
    if key not in _pool:
        _pool[key] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="qs-bucket")
    return list(_pool[key].map(fn, *iterables))


def _bucket_chunked(loss, scores, is_pos, n_pos, neg_rank, coef, n_chunks):
    """The method with both passes and the gathered buckets cut into ``n_chunks`` pieces."""
    n, n_neg = scores.size, neg_rank.size
    params = loss.prepare(n_pos, n_neg)
    n_buckets = n_buckets_for(n_pos, n_neg)
    low, scale = _sample_range(scores, n_buckets)
    ref = reference(scores)
    bounds = np.linspace(0, n, n_chunks + 1).astype(np.int64)
    pos_at = np.r_[0, np.cumsum([np.count_nonzero(is_pos[a:b]) for a, b in zip(bounds, bounds[1:])])]
    pos_values = np.empty(n_pos)
    pos_index = np.empty(n_pos, dtype=np.int64)
    count = np.zeros((n_chunks, n_buckets), dtype=np.int32)
    sums = np.zeros((n_chunks, n_buckets))
    ends = np.tile([np.inf, -np.inf, np.inf, -np.inf], (n_chunks, 1))
    buckets = np.empty(n, dtype=np.uint16)
    scanned = _map(lambda c: _scan_chunk(scores, is_pos, bounds[c], bounds[c + 1], low, scale,
                                         pos_values, pos_index, pos_at[c], count[c], sums[c],
                                         ends[c], ref, buckets),
                   range(n_chunks))
    for err, where, _ in scanned:
        if err != OK:
            return failed(err, where)
    sum_pos = sum(s[2] for s in scanned)
    ends = np.r_[ends[:, 0].min(), ends[:, 1].max(), ends[:, 2].min(), ends[:, 3].max()]
    pos_sorted, pos_index = sort_positives(pos_values, pos_index)
    c2, spos = positive_steps(pos_sorted, n_neg, ref)
    total = count.sum(axis=0, dtype=np.int32)
    order, first, top_r, bottom_r, rank_or_slot, straddling, starts, rank_count, steps = bind(
        _rank_corners, loss.kernel
    )(params, total, low, scale, ends, n_pos, spos, n_neg)
    coef_of_rank = _coef_of_rank(n_pos, n_neg)
    sum_neg, dot = _settled_sums(rank_or_slot, coef_of_rank, sums.sum(axis=0))
    g_score, g_index, g_place = _gathered_arrays(starts[-1])
    fill_from = _chunk_fill(count, order, straddling, starts)
    fill = fill_from.copy()
    slot_rank = top_r[straddling]
    moved = np.zeros((n_chunks, straddling.size), dtype=np.int64)
    dots = _map(lambda c: _settle_chunk(is_pos, bounds[c], bounds[c + 1], bounds[c] - pos_at[c],
                                        buckets, rank_or_slot, coef_of_rank, coef_of_rank, scores,
                                        c2, ref, slot_rank, steps, moved[c], fill[c], g_score,
                                        g_index, g_place, neg_rank, coef),
                range(n_chunks))
    n_live = _compact(starts, fill_from, fill, g_score, g_index, g_place)
    moved = moved.sum(axis=0)
    # straddling buckets cut into pieces of about equal numbers of gathered negatives
    live = np.cumsum(n_live)
    cuts = np.searchsorted(live, np.linspace(0, live[-1] if live.size else 0, n_chunks + 1)[1:-1])
    i_bounds = np.r_[0, np.clip(cuts, 0, straddling.size), straddling.size]
    solve = bind(_solve_gathered, loss.kernel)
    solved = _map(lambda c: solve(params, i_bounds[c], i_bounds[c + 1], first, top_r, bottom_r,
                                  straddling, starts, n_live, moved, g_score, g_index, g_place,
                                  n_pos, spos, n_neg, coef_of_rank, coef_of_rank, neg_rank, coef),
                  range(n_chunks))
    dot += sum(dots) + sum(d for d, _ in solved)
    rank_count = rank_count + sum(r for _, r in solved)
    return finish(rank_count, dot, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg, ref)


@jit
def n_buckets_for(n_pos, n_neg):
    """About 2 sqrt(N P) buckets, capped so that the counts stay in cache.

    The corners cost O(B + P log B) rank evaluations and the straddling buckets gather about
    P N / B negatives; their sum is smallest for B of order sqrt(N P) (measured: 2 sqrt(N P)
    is best or within a few percent of it from N = 3000 to 10^7).
    """
    return int(min(MAX_BUCKETS, max(16, 2.0 * (n_pos * n_neg) ** 0.5)))


#: the work array of a call that has none: too short, so the kernel allocates its own
NO_BUCKETS = np.empty(0, dtype=np.uint16)


def bucket_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """Ranks of all negatives by score buckets, sorting none of them."""
    if scores.size >= THREADED_MIN:
        return _bucket_chunked(loss, scores, is_pos, n_pos, neg_rank, coef, CHUNKS)
    params = loss.prepare(n_pos, neg_rank.size)
    n_buckets = n_buckets_for(n_pos, neg_rank.size)
    return bind(_bucket, loss.kernel)(params, scores, is_pos, n_pos, n_buckets, neg_rank, coef,
                                      0.0, 0.0, NO_BUCKETS)
