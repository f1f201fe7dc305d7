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
    ONE,
    canonical_ties,
    failed,
    finish,
    finish_pairs,
    finish_working,
    new_stack,
    opt_ranks_sorted,
    opt_ranks_unsorted,
    positive_steps,
    reference,
    scan_input,
)
from qs.inference._prepare import run_sorted


@jit
def _qs(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, idx, rk):
    n_neg = scores.size - n_pos
    ref = reference(scores)
    err, where, sum_pos, sum_neg, pos_sorted, pos_index = scan_input(scores, is_pos, n_pos, ref)
    if err != OK:
        return failed(err, where)
    c2 = 2.0 / (n_pos * n_neg)
    spos = positive_steps(pos_sorted, c2, ref)
    q = np.uintp(0)
    for k in range(scores.size):
        if not is_pos[k]:
            v[q] = scores[k]
            idx[q] = q
            q += ONE
    opt_ranks_unsorted(v, idx, rk, 0, n_neg - 1, 0, 1, n_pos + 1, inc, params, n_pos, c2, spos,
                       new_stack())
    canonical_ties(v, idx, rk, 0, n_neg - 1)
    rank_count, dot = finish_pairs(idx, rk, scores, is_pos, n_pos, n_neg, neg_rank, coef, ref)
    return finish(rank_count, dot, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg,
                  ref)


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


def qs_lai(loss, scores, is_pos, n_pos, neg_rank, coef):
    """Algorithm 1 (OptRanks) on a copy of the negatives, partitioned in place."""
    n = neg_rank.size
    params = loss.prepare(n_pos, n)
    work = np.empty(n), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    return bind(_qs, loss.kernel)(params, scores, is_pos, n_pos, neg_rank, coef, *work)


def sort_dc_lai(loss, scores, is_pos, n_pos, neg_rank, coef):
    """np.sort of the negatives, then the same divide and conquer over ranks."""
    return run_sorted(_sort_dc, loss, scores, is_pos, n_pos, neg_rank, coef)
