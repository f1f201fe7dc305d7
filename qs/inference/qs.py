"""The quicksort-flavoured method of paper 000 (Algorithm 1), and its fully sorted twin.

``qs`` never sorts the negatives: it splits a block of them around a pivot score, finds the
optimal ranks on either side of the split by trying the ranks still allowed, and recurses on
both parts with the rank interval split there (ranks are monotone in the place of a
negative). O(N log P + P log P) expected.

``sort_dc`` is the same recursion on negatives sorted by ``np.sort``: no partitioning, one
O(N log N) sort. It is the simple exact peer the benchmark sets beside ``qs``.
"""

import numpy as np

from qs._numba import bind, jit_generic
from qs.inference._core import (
    canonical_ties,
    finish_pairs,
    finish_working,
    new_stack,
    opt_ranks_sorted,
    opt_ranks_unsorted,
    positive_steps,
)


@jit_generic
def _qs(inc, params, v, idx, rk, scores, is_pos, n_pos, n_neg, pos_sorted, neg_rank, coef):
    c2 = 2.0 / (n_pos * n_neg)
    spos = positive_steps(pos_sorted, c2)
    q = 0
    for k in range(scores.size):
        if not is_pos[k]:
            v[q] = scores[k]
            idx[q] = q
            q += 1
    opt_ranks_unsorted(v, idx, rk, 0, n_neg - 1, 0, 1, n_pos + 1, inc, params, n_pos, c2, spos,
                       new_stack())
    canonical_ties(v, idx, rk, 0, n_neg - 1)
    return finish_pairs(idx, rk, scores, is_pos, n_pos, n_neg, neg_rank, coef)


@jit_generic
def _sort_dc(inc, params, v, rk, scores, is_pos, n_pos, n_neg, pos_sorted, neg_rank, coef):
    c2 = 2.0 / (n_pos * n_neg)
    spos = positive_steps(pos_sorted, c2)
    opt_ranks_sorted(v, rk, 0, v.size - 1, 0, None, 1, n_pos + 1, inc, params, n_pos, c2, spos)
    return finish_working(v, rk, scores, is_pos, n_pos, n_neg, neg_rank, coef)


def qs_ranks(ctx):
    """Algorithm 1 (OptRanks) on a copy of the negatives, partitioned in place."""
    n = ctx.n_neg
    work = np.empty(n), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    return bind(_qs, ctx.kernel)(ctx.params, *work, *ctx.data)


def sort_dc_ranks(ctx):
    """np.sort of the negatives, then the same divide and conquer over ranks."""
    rk = np.empty(ctx.n_neg, dtype=np.int64)
    return bind(_sort_dc, ctx.kernel)(ctx.params, ctx.sorted_negatives(), rk, *ctx.data)
