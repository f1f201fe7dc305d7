"""The baselines: sort the negatives, then scan every rank for each of them.

With the AP loss this is the loss-augmented inference of Yue et al. (2007), with the NDCG
loss that of Chakrabarti et al. (2008) (with a convex discount, see ``qs.losses``). Both
cost O(NP + N log N); they share one kernel, written as carefully as the fast methods so
that a ratio of times measures the algorithms.
"""

import functools

from qs._numba import jit
from qs.inference._output import finish_sorted
from qs.inference._prepare import run_sorted
from qs.inference._ranks import best_rank, positive_steps


@jit
def scan_sorted(
    inc, params, v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef, sum_pos, sum_neg, ref
):
    """Every negative of the sorted ``v`` tries every rank."""
    n_pos = pos_sorted.size
    c2, spos = positive_steps(pos_sorted, v.size, ref)
    for m in range(v.size):
        rk[m] = best_rank(inc, params, n_pos, c2, spos, v[m], m + 1, 1, n_pos + 1)
    return finish_sorted(
        v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef, sum_pos, sum_neg, ref
    )


#: the method (the Yue / Chakrabarti baseline), as `qs.inference.lai` runs it
scan_lai = functools.partial(run_sorted, scan_sorted)
