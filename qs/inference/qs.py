"""The quicksort-flavoured method of Mohapatra et al., CVPR 2018 (Algorithm 1), and its fully
sorted twin.

``qs`` never sorts the negatives: it splits a block of them around a pivot score, finds the
optimal ranks on either side of the split by trying the ranks still allowed, and recurses on
both parts with the rank interval split there (ranks are monotone in the place of a
negative). O(N log P + P log P) expected. It runs in the kernel it shares with ``auto`` and
``bucket_sort`` (`qs.inference.auto`), which gathers the negatives split around a
first pivot in its pass over the input.

``sort_dc`` is the same recursion on negatives sorted by ``np.sort``: no partitioning, one
O(N log N) sort. It is the simple exact peer the benchmark sets beside ``qs``.
"""

import functools

from qs._numba import jit, jit_inline
from qs.inference._output import canonical_ties, finish_sorted
from qs.inference._prepare import run_sorted
from qs.inference._ranks import opt_ranks_sorted, opt_ranks_unsorted, positive_steps


@jit_inline
def qs_ranks(inc, params, v, key, rk, n_pos, c2, spos, stack, pivot, above):
    """Algorithm 1 on the gathered negatives ``v`` (keys ``key``, see
    `scan_gather_split`) split around ``pivot``, ``above`` of them
    above it, and partitioned further in place: the rank at each position into ``rk``
    (non-decreasing along ``v``), tied negatives ranked in input order."""
    n_neg = v.size
    if opt_ranks_unsorted(
        v, key, rk, 0, n_neg - 1, 0, 1, n_pos + 1, inc, params, n_pos, c2, spos, stack, pivot, above
    ):
        canonical_ties(v, key, rk, 0, n_neg - 1)


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
