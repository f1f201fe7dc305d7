"""AP-SVM-SEARCH (Mohapatra et al., arXiv:1604.08269, Section 5, Algorithm 3): binary search where
AP is unimodal.

For the AP loss the increments of the objective of the negative at place ``j`` are
non-increasing over the first ``q = min(j, P)`` ranks (Mohapatra et al., arXiv:1604.08269,
Proposition 5): its objective is concave there, and the largest maximiser is found by binary search
on the sign of the increment. Past ``q`` the ranks are scanned. Negatives are sorted first:
O(N log N + N log P + P^2).
"""

import functools

from qs._numba import jit
from qs.inference._output import finish_sorted
from qs.inference._prepare import run_sorted
from qs.inference._ranks import best_rank, positive_steps
from qs.losses import increment


@jit
def search_sorted(
    inc, params, v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef, sum_pos, sum_neg, ref
):
    """Binary search per negative of the sorted ``v`` over the concave part of its AP
    objective, a scan past it."""
    n_pos = pos_sorted.size
    c2, spos = positive_steps(pos_sorted, v.size, ref)
    for m in range(v.size):
        j = m + 1
        cs = c2 * (v[m] - spos[0])
        lo = 1
        hi = min(j, n_pos)
        last = 0  # largest i <= q with a non-negative increment
        while lo <= hi:
            mid = (lo + hi) >> 1
            if spos[mid] - cs + increment(inc, j, mid, n_pos, params) >= 0.0:
                last = mid
                lo = mid + 1
            else:
                hi = mid - 1
        r = last + 1
        if j < n_pos:  # the ranks past the concave part are scanned
            r = best_rank(inc, params, n_pos, c2, spos, v[m], j, r, n_pos + 1)
        rk[m] = r
    return finish_sorted(
        v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef, sum_pos, sum_neg, ref
    )


#: the method, as `qs.inference.lai` runs it
search_lai = functools.partial(run_sorted, search_sorted)
