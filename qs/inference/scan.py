"""The baselines: sort the negatives, then scan every rank for each of them.

With the AP loss this is the loss-augmented inference of Yue et al. (2007), with the NDCG
loss that of Chakrabarti et al. (2008) (with a convex discount, see ``qs.losses``). Both
cost O(NP + N log N); they share one kernel, written as carefully as the fast methods so
that a ratio of times measures the algorithms.
"""

from qs._numba import jit
from qs.inference._output import finish, finish_working
from qs.inference._ranks import best_rank, positive_steps
from qs.inference._prepare import run_sorted


@jit
def scan_sorted(inc, params, v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef,
                sum_pos, sum_neg, ref):
    n_pos, n_neg = pos_sorted.size, v.size
    c2 = 2.0 / (n_pos * n_neg)
    spos = positive_steps(pos_sorted, c2, ref)
    for m in range(v.size):
        rk[m] = best_rank(inc, params, n_pos, c2, spos, v[m], m + 1, 1, n_pos + 1)
    rank_count, dot = finish_working(v, rk, scores, is_pos, n_pos, n_neg, neg_rank, coef, ref)
    return finish(rank_count, dot, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg,
                  ref)


def scan_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """Every negative tries every rank (the Yue / Chakrabarti baseline)."""
    return run_sorted(scan_sorted, loss, scores, is_pos, n_pos, neg_rank, coef)
