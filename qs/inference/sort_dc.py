"""``sort_dc``: Algorithm 1 of Mohapatra et al., CVPR 2018 on negatives sorted by
``np.sort``.

The divide and conquer over ranks of ``qs`` (`qs.inference.qs`), with no partitioning:
one O(N log N) sort of the negatives, then the recursion on them. It is the simple exact peer
the benchmark sets beside ``qs``.
"""

import functools

from qs._numba import jit
from qs.inference._output import finish_sorted
from qs.inference._prepare import run_sorted
from qs.inference._ranks import opt_ranks_sorted, positive_steps

__all__ = ["sort_dc", "sort_dc_lai"]


@jit
def sort_dc(
    inc, params, v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef, sum_pos, sum_neg, ref
):
    """Algorithm 1's divide and conquer over ranks on the sorted negatives ``v``."""
    n_pos = pos_sorted.size
    c2, spos = positive_steps(pos_sorted, v.size, ref)
    opt_ranks_sorted(v, rk, 0, v.size - 1, 0, None, 1, n_pos + 1, inc, params, n_pos, c2, spos)
    return finish_sorted(
        v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef, sum_pos, sum_neg, ref
    )


#: ``sort_dc``: np.sort of the negatives, then the same divide and conquer over ranks
sort_dc_lai = functools.partial(run_sorted, sort_dc)
