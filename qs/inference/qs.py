"""The quicksort-flavoured method of Mohapatra et al., CVPR 2018 (Algorithm 1): ``qs``.

``qs`` never sorts the negatives: it splits a block of them around a pivot score, finds the
optimal ranks on either side of the split by trying the ranks still allowed, and recurses on
both parts with the rank interval split there (ranks are monotone in the place of a
negative). O(N log P + P log P) expected. It runs in the kernel it shares with ``auto`` and
``bucket_sort`` (`qs.inference.auto`), which gathers the negatives split around a
first pivot in its pass over the input. Its fully sorted twin is `qs.inference.sort_dc`.
"""

from qs._numba import jit_inline
from qs.inference._output import canonical_ties
from qs.inference._ranks import opt_ranks_unsorted


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
