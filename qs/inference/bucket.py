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

The histogram pass keeps each score's bucket (uint16: at most `MAX_BUCKETS` = 2^16 buckets)
and the sum of the negatives' scores per bucket, so that the settling pass reads no score of
a settled bucket: a table lookup gives its members' rank and coefficient, and F's share of
them comes from the bucket's sum, where finding each bucket again and summing coefficient
times score would make every addition wait on the last. The coefficients may be written
shifted and in float32 (a gradient ``coef(R_bar) - coef(R*)``, `bucket_ranks`), with no pass
of their own.

The passes over the input (histogram, then settling) and the gathered buckets are cut into
pieces that run on threads for large inputs. The pieces depend on the input size only, not
on the number of threads, so the result does too.
"""

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from qs._numba import bind, jit
from qs.inference._bucket_passes import (
    chunk_fill,
    compact,
    gathered_arrays,
    rank_coefficients,
    rank_corners,
    rank_weights,
    sample_range,
    scan_chunk,
    scan_histogram,
    settle_chunk,
    settled_sums,
    solve_gathered,
)
from qs.inference._hinge import add
from qs.inference._input import OK, failed, reference
from qs.inference._output import finish
from qs.inference._ranks import positive_steps
from qs.inference._sorting import MAX_BUCKETS, sort_positives
from qs.inference.workspace import Workspace
from qs.losses import QSLoss

#: inputs with at least this many samples are cut into ``CHUNKS`` pieces run on threads
THREADED_MIN = 1 << 21
CHUNKS = 8


@jit
def bucket_ranks(
    inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef, shift_pos, shift_neg, buckets
):
    """The whole method in one thread. ``coef`` (float64 or float32) gets each coefficient
    less ``shift_pos`` at a positive and ``shift_neg`` at a negative, rounded once to its
    dtype: a gradient ``coef(R_bar) - coef(R*)`` written with no pass of its own.
    ``buckets``: a uint16 work array of at least ``scores.size`` (allocated here if
    shorter)."""
    n_neg = scores.size - n_pos
    ref = reference(scores)
    if buckets.size < scores.size:
        buckets = np.empty(scores.size, dtype=np.uint16)
    err, where, sum_pos, pos_sorted, pos_index, low, scale, count, sums, ends = scan_histogram(
        scores, is_pos, n_pos, n_buckets, ref, buckets
    )
    if err != OK:
        return failed(err, where)
    c2, spos = positive_steps(pos_sorted, n_neg, ref)
    _, first, top_r, bottom_r, rank_or_slot, straddling, starts, rank_count, steps = rank_corners(
        inc, params, count, low, scale, ends, n_pos, spos, n_neg
    )
    out_of_rank = rank_coefficients(n_pos, n_neg) - shift_neg
    weight_of_rank = rank_weights(n_pos, n_neg)
    sum_neg, total, comp = settled_sums(rank_or_slot, weight_of_rank, sums)
    g_score, g_index, g_place = gathered_arrays(starts[-1])
    fill_from = starts[:-1].copy().reshape((1, straddling.size))
    fill = fill_from.copy()
    moved = np.zeros(straddling.size, dtype=np.int64)
    t, c = settle_chunk(
        is_pos,
        0,
        scores.size,
        0,
        buckets,
        rank_or_slot,
        weight_of_rank,
        out_of_rank,
        scores,
        c2,
        ref,
        top_r[straddling],
        steps,
        moved,
        fill[0],
        g_score,
        g_index,
        g_place,
        neg_rank,
        coef,
    )
    total, comp = add(total, comp + c, t)
    n_live = compact(starts, fill_from, fill, g_score, g_index, g_place)
    t, c, count_g = solve_gathered(
        inc,
        params,
        0,
        straddling.size,
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
    )
    total, comp = add(total, comp + c, t)
    return finish(
        rank_count + count_g,
        total,
        comp,
        pos_sorted,
        pos_index,
        n_neg,
        coef,
        sum_pos,
        sum_neg,
        ref,
        shift_pos,
    )


_pool: dict[
    tuple[int, int], object
] = {}  # (process id, workers) -> pool: a forked child starts its own threads


def thread_count():
    """numba's configured thread count (``NUMBA_NUM_THREADS``), without launching its threads.

    Launching the OpenMP layer sets the OpenMP thread count of the whole process, torch's
    included (a torch limited to one thread went back to all cores).

    Returns
    -------
    int
        The thread count.

    Examples
    --------
    >>> thread_count() >= 1
    True
    """
    return numba.config.NUMBA_NUM_THREADS


def thread_map(fn, *iterables):
    """``fn`` over the pieces on a pool of `thread_count` threads (the kernels release the GIL).

    Parameters
    ----------
    fn : callable
        Called on one item of each iterable at a time, as `map` calls it.
    *iterables : iterable
        The pieces.

    Returns
    -------
    list
        ``fn``'s results, in order.

    Examples
    --------
    >>> thread_map(pow, [2, 3], [3, 2])
    [8, 9]
    """
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
    low, scale = sample_range(scores, n_buckets)
    ref = reference(scores)
    bounds = np.linspace(0, n, n_chunks + 1).astype(np.int64)
    pos_at = np.r_[
        0, np.cumsum([np.count_nonzero(is_pos[a:b]) for a, b in zip(bounds, bounds[1:])])
    ]
    pos_values = np.empty(n_pos)
    pos_index = np.empty(n_pos, dtype=np.int64)
    count = np.zeros((n_chunks, n_buckets), dtype=np.int32)
    sums = np.zeros((n_chunks, n_buckets))
    ends = np.tile([np.inf, -np.inf, np.inf, -np.inf], (n_chunks, 1))
    buckets = np.empty(n, dtype=np.uint16)
    scanned = thread_map(
        lambda c: scan_chunk(
            scores,
            is_pos,
            bounds[c],
            bounds[c + 1],
            low,
            scale,
            pos_values,
            pos_index,
            pos_at[c],
            count[c],
            sums[c],
            ends[c],
            ref,
            buckets,
        ),
        range(n_chunks),
    )
    for err, where, _ in scanned:
        if err != OK:
            return failed(err, where)
    sum_pos = sum(s[2] for s in scanned)
    ends = np.r_[ends[:, 0].min(), ends[:, 1].max(), ends[:, 2].min(), ends[:, 3].max()]
    pos_sorted, pos_index = sort_positives(pos_values, pos_index)
    c2, spos = positive_steps(pos_sorted, n_neg, ref)
    total = count.sum(axis=0, dtype=np.int32)
    order, first, top_r, bottom_r, rank_or_slot, straddling, starts, rank_count, steps = bind(
        rank_corners, loss.kernel
    )(params, total, low, scale, ends, n_pos, spos, n_neg)
    coef_of_rank = rank_coefficients(n_pos, n_neg)
    weight_of_rank = rank_weights(n_pos, n_neg)
    sum_neg, total, comp = settled_sums(rank_or_slot, weight_of_rank, sums.sum(axis=0))
    g_score, g_index, g_place = gathered_arrays(starts[-1])
    fill_from = chunk_fill(count, order, straddling, starts)
    fill = fill_from.copy()
    slot_rank = top_r[straddling]
    moved = np.zeros((n_chunks, straddling.size), dtype=np.int64)
    dots = thread_map(
        lambda c: settle_chunk(
            is_pos,
            bounds[c],
            bounds[c + 1],
            bounds[c] - pos_at[c],
            buckets,
            rank_or_slot,
            weight_of_rank,
            coef_of_rank,
            scores,
            c2,
            ref,
            slot_rank,
            steps,
            moved[c],
            fill[c],
            g_score,
            g_index,
            g_place,
            neg_rank,
            coef,
        ),
        range(n_chunks),
    )
    n_live = compact(starts, fill_from, fill, g_score, g_index, g_place)
    moved = moved.sum(axis=0)
    # straddling buckets cut into pieces of about equal numbers of gathered negatives
    live = np.cumsum(n_live)
    cuts = np.searchsorted(live, np.linspace(0, live[-1] if live.size else 0, n_chunks + 1)[1:-1])
    i_bounds = np.r_[0, np.clip(cuts, 0, straddling.size), straddling.size]
    solve = bind(solve_gathered, loss.kernel)
    solved = thread_map(
        lambda c: solve(
            params,
            i_bounds[c],
            i_bounds[c + 1],
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
            coef_of_rank,
            neg_rank,
            coef,
        ),
        range(n_chunks),
    )
    # the chunks' compensated sums joined in full (qs.inference._hinge)
    total = math.fsum(
        [total, comp, *(x for d in dots for x in d), *(x for d in solved for x in d[:2])]
    )
    rank_count = rank_count + sum(d[2] for d in solved)
    return finish(rank_count, total, 0.0, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg, ref)


@jit
def n_buckets_for(n_pos, n_neg):
    """About 2 sqrt(N P) buckets, capped so that the counts stay in cache.

    The corners cost O(B + P log B) rank evaluations and the straddling buckets gather about
    P N / B negatives; their sum is smallest for B of order sqrt(N P), and the factor 2 was
    the best measured.
    """
    return int(min(MAX_BUCKETS, max(16, 2.0 * (n_pos * n_neg) ** 0.5)))


#: the work array of a call that has none: too short, so the kernel allocates its own
NO_BUCKETS = np.empty(0, dtype=np.uint16)


def bucket_lai(
    loss: QSLoss,
    scores: np.ndarray,
    is_pos: np.ndarray,
    n_pos: int,
    neg_rank: np.ndarray,
    coef: np.ndarray,
    ws: Workspace | None = None,
) -> tuple[int, int, float, float, np.ndarray, float]:
    """Ranks of all negatives by score buckets, sorting none of them.

    Parameters
    ----------
    loss : QSLoss
        The loss (its increment kernel and its ``prepare``).
    scores : ndarray of float64, shape (n,)
        The scores.
    is_pos : ndarray of uint8, shape (n,)
        1 at the positives, 0 at the negatives.
    n_pos : int
        The number of positives, at least 1 and less than n.
    neg_rank : ndarray of int32, shape (n - n_pos,)
        Written: the interleaving rank of each negative, in input order.
    coef : ndarray of float64, shape (n,)
        Written: the coefficients of the joint feature map.
    ws : Workspace, optional
        Work arrays reused from call to call (`qs.inference.Workspace`).

    Returns
    -------
    tuple
        (error code, the index of a non-finite score or -1, the sums of the positives' and
        the negatives' scores less the reference score, the negatives above each positive
        (int64), the hinge's score term ``F(R_bar) - F(R*)``), as `qs.inference.lai` reads
        them.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.inference.bucket import bucket_lai
    >>> from qs.losses import get_loss
    >>> scores, is_pos = np.array([2.0, 1.0, 0.5, -1.0]), np.array([1, 0, 1, 0], dtype=np.uint8)
    >>> neg_rank, coef = np.empty(2, dtype=np.int32), np.empty(4)
    >>> err, where, *_ = bucket_lai(get_loss("ap"), scores, is_pos, 2, neg_rank, coef)
    >>> neg_rank.tolist()
    [2, 3]
    """
    if scores.size >= THREADED_MIN:
        return _bucket_chunked(loss, scores, is_pos, n_pos, neg_rank, coef, CHUNKS)
    params = loss.prepare(n_pos, neg_rank.size)
    n_buckets = n_buckets_for(n_pos, neg_rank.size)
    return bind(bucket_ranks, loss.kernel)(
        params, scores, is_pos, n_pos, n_buckets, neg_rank, coef, 0.0, 0.0, NO_BUCKETS
    )
