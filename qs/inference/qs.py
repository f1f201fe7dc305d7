"""The quicksort-flavoured method of paper 000 (Algorithm 1), and its fully sorted twin.

``qs`` never sorts the negatives: it splits a block of them around a pivot score, finds the
optimal ranks on either side of the split by trying the ranks still allowed, and recurses on
both parts with the rank interval split there (ranks are monotone in the place of a
negative). O(N log P + P log P) expected.

``sort_dc`` is the same recursion on negatives sorted by ``np.sort``: no partitioning, one
O(N log N) sort. It is the simple exact peer the benchmark sets beside ``qs``.
"""

import numpy as np

from qs._numba import bind, jit
from qs.inference._core import (
    OK,
    STACK_SHAPE,
    STACK_SIZE,
    canonical_ties,
    failed,
    finish,
    finish_working,
    input_pivot,
    new_stack,
    opt_ranks_presplit,
    opt_ranks_sorted,
    positive_steps,
    positive_steps_into,
    rank_pass,
    reference,
    scan_gather,
    scan_gather_split,
    sort_positives_hinted,
)
from qs.inference._prepare import run_sorted

#: the work arrays of :func:`_qs_into` after the outputs: (name, size, dtype), sizes in
#: terms of N and P (see :meth:`Workspace.arrays`)
WORK = (("v", "N", np.float64), ("key", "N", np.int64), ("rk", "N", np.int64),
        ("pos_values", "P", np.float64), ("pos_index", "P", np.int64),
        ("spos", "P+1", np.float64), ("rank_count", "P+2", np.int64), ("stack", "stack", None),
        ("order", "P", np.int64), ("tmp_v", "P", np.float64), ("tmp_i", "P", np.int64))


@jit
def packed_floats(n_neg, n_pos):
    """Size of the float64 buffer that holds the float arrays of :data:`WORK`."""
    return n_neg + 3 * n_pos + 1


@jit
def packed_ints(n_neg, n_pos):
    """Size of the int64 buffer that holds the integer arrays of :data:`WORK`."""
    return 2 * n_neg + 4 * n_pos + 2 + STACK_SIZE


#: :data:`WORK` as two buffers, one per dtype (:func:`unpack` cuts them): a kernel call from
#: Python pays about 0.08 us per array argument to unbox it, 1 us of a training call's 45
PACKED = (("floats", packed_floats, np.float64), ("ints", packed_ints, np.int64))


@jit
def unpack(floats, ints, n_neg, n_pos):
    """The arrays of :data:`WORK` as views of the buffers of :data:`PACKED` (or of larger
    ones: what follows is free for other methods). ``order`` keeps its place from one call
    to the next of the same sizes, as its hint needs."""
    n, p = n_neg, n_pos
    v, pos_values = floats[:n], floats[n : n + p]
    spos, tmp_v = floats[n + p : n + 2 * p + 1], floats[n + 2 * p + 1 : n + 3 * p + 1]
    key, rk, pos_index = ints[:n], ints[n : 2 * n], ints[2 * n : 2 * n + p]
    rank_count = ints[2 * n + p : 2 * n + 2 * p + 2]
    order = ints[2 * n + 2 * p + 2 : 2 * n + 3 * p + 2]
    tmp_i = ints[2 * n + 3 * p + 2 : 2 * n + 4 * p + 2]
    stack = ints[2 * n + 4 * p + 2 : 2 * n + 4 * p + 2 + STACK_SIZE].reshape(STACK_SHAPE)
    return v, key, rk, pos_values, pos_index, spos, rank_count, stack, order, tmp_v, tmp_i


@jit
def gather(scores, is_pos, v, key, pos_values, pos_index, order, tmp_v, tmp_i):
    """The pass over the input (:func:`scan_gather`) and the positives sorted (from the
    previous call's ``order``). Returns (error, error_index, sum_pos, sum_neg, ref)."""
    ref = reference(scores)
    err, where, sum_pos, sum_neg = scan_gather(scores, is_pos, ref, pos_values, pos_index, v,
                                               key)
    if err == OK:
        sort_positives_hinted(pos_values, pos_index, order, tmp_v, tmp_i)
    return err, where, sum_pos, sum_neg, ref


@jit
def gather_split(scores, is_pos, v, key, pos_values, pos_index, order, tmp_v, tmp_i):
    """:func:`gather` that also splits the negatives around a pivot taken from the input
    (:func:`scan_gather_split`): the first partition of the divide and conquer done in the
    pass over the input, where it costs nothing (at P = 227, N = 3085 it took about 4 us).
    Returns (error, error_index, sum_pos, sum_neg, ref, pivot, how many negatives are above
    it)."""
    ref = reference(scores)
    pivot = input_pivot(scores)
    err, where, sum_pos, sum_neg, above = scan_gather_split(scores, is_pos, ref, pivot,
                                                            pos_values, pos_index, v, key)
    if err == OK:
        sort_positives_hinted(pos_values, pos_index, order, tmp_v, tmp_i)
    return err, where, sum_pos, sum_neg, ref, pivot, above


@jit
def qs_gathered(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, key, rk, pos_values,
                pos_index, spos, rank_count, stack, sum_pos, sum_neg, ref, pivot, above):
    """Algorithm 1 on the negatives ``v`` that :func:`gather_split` split around ``pivot``
    (partitioned further in place, ``key`` along) and sorted positives, then the result."""
    n_neg = v.size
    c2 = 2.0 / (n_pos * n_neg)
    positive_steps_into(pos_values, c2, ref, spos)
    if opt_ranks_presplit(v, key, rk, 0, n_neg - 1, 0, 1, n_pos + 1, inc, params, n_pos, c2,
                          spos, stack, pivot, above):
        canonical_ties(v, key, rk, 0, n_neg - 1)
    dot = rank_pass(v, key, rk, n_pos, scores, is_pos, neg_rank, coef, ref, rank_count)
    return finish(rank_count, dot, pos_values, pos_index, n_neg, coef, sum_pos, sum_neg, ref)


@jit
def _qs_into(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, key, rk, pos_values,
             pos_index, spos, rank_count, stack, order, tmp_v, tmp_i):
    """The method on the caller's work arrays (:data:`WORK`)."""
    err, where, sum_pos, sum_neg, ref, pivot, above = gather_split(
        scores, is_pos, v, key, pos_values, pos_index, order, tmp_v, tmp_i)
    if err != OK:
        return failed(err, where)
    return qs_gathered(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, key, rk, pos_values,
                       pos_index, spos, rank_count, stack, sum_pos, sum_neg, ref, pivot, above)


@jit
def _qs_packed(inc, params, scores, is_pos, n_pos, neg_rank, coef, floats, ints):
    """:func:`_qs_into` on the buffers of :data:`PACKED`."""
    return _qs_into(inc, params, scores, is_pos, n_pos, neg_rank, coef,
                    *unpack(floats, ints, neg_rank.size, n_pos))


@jit
def _qs(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, idx, rk):
    """:func:`_qs_into` with its small work arrays allocated here."""
    return _qs_into(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, idx, rk,
                    np.empty(n_pos), np.empty(n_pos, dtype=np.int64), np.empty(n_pos + 1),
                    np.empty(n_pos + 2, dtype=np.int64), new_stack(),
                    np.full(n_pos, -1, dtype=np.int64), np.empty(n_pos),
                    np.empty(n_pos, dtype=np.int64))


@jit
def _sort_dc(inc, params, v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef,
             sum_pos, sum_neg, ref):
    n_pos, n_neg = pos_sorted.size, v.size
    c2 = 2.0 / (n_pos * n_neg)
    spos = positive_steps(pos_sorted, c2, ref)
    opt_ranks_sorted(v, rk, 0, n_neg - 1, 0, None, 1, n_pos + 1, inc, params, n_pos, c2, spos)
    rank_count, dot = finish_working(v, rk, scores, is_pos, n_pos, n_neg, neg_rank, coef, ref)
    return finish(rank_count, dot, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg,
                  ref)


def check_size(scores):
    """The keys of :func:`~qs.inference._core.scan_gather` hold input indices in 32 bits."""
    if scores.size >= 1 << 32:
        raise ValueError(f"this method takes inputs of fewer than 2^32 samples; got "
                         f"{scores.size}. Use method='bucket'.")


def qs_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """Algorithm 1 (OptRanks) on a copy of the negatives, partitioned in place; work arrays
    from the :class:`~qs.inference.Workspace` ``ws`` when given."""
    check_size(scores)
    n = neg_rank.size
    params = loss.prepare(n_pos, n)
    if ws is None:  # allocated inside the kernel: faster than a Workspace's arrays
        return bind(_qs, loss.kernel)(params, scores, is_pos, n_pos, neg_rank, coef, np.empty(n),
                                      np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64))
    return bind(_qs_packed, loss.kernel)(params, scores, is_pos, n_pos, neg_rank, coef,
                                         *ws.arrays(PACKED, neg_rank.size, n_pos))


def sort_dc_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """np.sort of the negatives, then the same divide and conquer over ranks."""
    return run_sorted(_sort_dc, loss, scores, is_pos, n_pos, neg_rank, coef)
