"""The quicksort-flavoured method of paper 000 (Algorithm 1), and its fully sorted twin.

``qs`` never sorts the negatives: it selects the median of a block (quickselect), finds its
optimal rank by trying the ranks still allowed, and recurses on both halves with the rank
interval split there (ranks are monotone in the place of a negative). O(N log P + P log P).

``sort_dc`` is the same recursion on negatives sorted by ``np.sort``: no selection, one
O(N log N) sort. It is the simple exact peer the benchmark sets beside ``qs``.
"""

import numpy as np

from qs.inference._core import opt_ranks


def _opt_ranks(ctx, v, select):
    rk = np.empty(v.size, dtype=np.int64)
    opt_ranks(v, rk, 0, v.size - 1, 0, None, 1, ctx.n_pos + 1, select,
              ctx.kernel, ctx.params, ctx.n_pos, ctx.c2, ctx.spos)
    return ctx.assign_working(v, rk)


def qs_ranks(ctx):
    """Algorithm 1 (OptRanks) with Median + Select on a copy of the negatives."""
    return _opt_ranks(ctx, ctx.negatives(), True)


def sort_dc_ranks(ctx):
    """np.sort of the negatives, then the same divide and conquer over ranks."""
    return _opt_ranks(ctx, ctx.sorted_negatives(), False)
