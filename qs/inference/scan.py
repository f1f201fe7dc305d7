"""The baselines: sort the negatives, then scan every rank for each of them.

With the AP loss this is the loss-augmented inference of Yue et al. (2007), with the NDCG
loss that of Chakrabarti et al. (2008) (with a convex discount, see ``qs.losses``). Both
cost O(NP + N log N); they share one kernel, written as carefully as the fast methods so
that a ratio of times measures the algorithms.
"""

import numpy as np

from qs._numba import jit_generic
from qs.inference._core import best_rank


@jit_generic
def _scan_sorted(v, rk, inc, params, n_pos, c2, spos):
    for m in range(v.size):
        rk[m] = best_rank(inc, params, n_pos, c2, spos, v[m], m + 1, 1, n_pos + 1)


def scan_ranks(ctx):
    """Every negative tries every rank (the Yue / Chakrabarti baseline)."""
    v = ctx.sorted_negatives()
    rk = np.empty(v.size, dtype=np.int64)
    _scan_sorted(v, rk, ctx.kernel, ctx.params, ctx.n_pos, ctx.c2, ctx.spos)
    return ctx.assign_working(v, rk)
