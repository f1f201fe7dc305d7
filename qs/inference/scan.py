"""The baselines: sort the negatives, then scan every rank for each of them.

With the AP loss this is the loss-augmented inference of Yue et al. (2007), with the NDCG
loss that of Chakrabarti et al. (2008) (with a convex discount, see ``qs.losses``). Both
cost O(NP + N log N); they share one kernel, written as carefully as the fast methods so
that a ratio of times measures the algorithms.
"""

import numpy as np

from qs._numba import bind, jit_generic
from qs.inference._core import best_rank, finish_working, positive_steps


@jit_generic
def _scan_sorted(inc, params, v, rk, scores, is_pos, n_pos, n_neg, pos_sorted, neg_rank, coef):
    c2 = 2.0 / (n_pos * n_neg)
    spos = positive_steps(pos_sorted, c2)
    for m in range(v.size):
        rk[m] = best_rank(inc, params, n_pos, c2, spos, v[m], m + 1, 1, n_pos + 1)
    return finish_working(v, rk, scores, is_pos, n_pos, n_neg, neg_rank, coef)


def scan_ranks(ctx):
    """Every negative tries every rank (the Yue / Chakrabarti baseline)."""
    rk = np.empty(ctx.n_neg, dtype=np.int64)
    return bind(_scan_sorted, ctx.kernel)(ctx.params, ctx.sorted_negatives(), rk, *ctx.data)
