"""The quicksort-flavoured method of paper 000 (Algorithm 1), and its fully sorted twin.

``qs`` never sorts the negatives: it splits a block of them around a pivot score, finds the
optimal ranks on either side of the split by trying the ranks still allowed, and recurses on
both parts with the rank interval split there (ranks are monotone in the place of a
negative). O(N log P + P log P) expected.

``sort_dc`` is the same recursion on negatives sorted by ``np.sort``: no partitioning, one
O(N log N) sort. It is the simple exact peer the benchmark sets beside ``qs``.
"""

import numpy as np

from qs._numba import bind, jit
from qs.inference._core import (
    OK,
    canonical_ties,
    failed,
    finish,
    finish_working,
    negative_coefficients_into,
    new_stack,
    opt_ranks_sorted,
    opt_ranks_unsorted,
    positive_steps,
    positive_steps_into,
    reference,
    scan_gather,
    sort_positives_into,
)
from qs.inference._prepare import run_sorted
from qs.inference.workspace import Workspace


@jit
def _qs_into(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, idx, rk, pos_values,
             pos_index, spos, rank_count, stack):
    """The method on the caller's work arrays: ``v``, ``idx``, ``rk`` of N elements,
    ``pos_values``, ``pos_index`` of P, ``spos`` of P + 1, ``rank_count`` of P + 2, and a
    :func:`new_stack`."""
    n_neg = scores.size - n_pos
    ref = reference(scores)
    err, where, sum_pos, sum_neg = scan_gather(scores, is_pos, ref, pos_values, pos_index, v, idx)
    if err != OK:
        return failed(err, where)
    sort_positives_into(pos_values, pos_index)
    c2 = 2.0 / (n_pos * n_neg)
    positive_steps_into(pos_values, c2, ref, spos)
    if opt_ranks_unsorted(v, idx, rk, 0, n_neg - 1, 0, 1, n_pos + 1, inc, params, n_pos, c2,
                          spos, stack):
        canonical_ties(v, idx, rk, 0, n_neg - 1)
    for p in range(np.uintp(n_neg)):
        neg_rank[np.uintp(idx[p])] = rk[p]
    dot = negative_coefficients_into(scores, is_pos, neg_rank, n_pos, n_neg, coef, ref,
                                     rank_count)
    return finish(rank_count, dot, pos_values, pos_index, n_neg, coef, sum_pos, sum_neg, ref)


@jit
def _qs(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, idx, rk):
    """:func:`_qs_into` with its small work arrays allocated here."""
    return _qs_into(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, idx, rk,
                    np.empty(n_pos), np.empty(n_pos, dtype=np.int64), np.empty(n_pos + 1),
                    np.empty(n_pos + 2, dtype=np.int64), new_stack())


@jit
def _sort_dc(inc, params, v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef,
             sum_pos, sum_neg, ref):
    n_pos, n_neg = pos_sorted.size, v.size
    c2 = 2.0 / (n_pos * n_neg)
    spos = positive_steps(pos_sorted, c2, ref)
    opt_ranks_sorted(v, rk, 0, n_neg - 1, 0, None, 1, n_pos + 1, inc, params, n_pos, c2, spos)
    rank_count, dot = finish_working(v, rk, scores, is_pos, n_pos, n_neg, neg_rank, coef, ref)
    return finish(rank_count, dot, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg,
                  ref)


def qs_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """Algorithm 1 (OptRanks) on a copy of the negatives, partitioned in place; work arrays
    from the :class:`~qs.inference.Workspace` ``ws`` when given."""
    n = neg_rank.size
    params = loss.prepare(n_pos, n)
    ws = Workspace() if ws is None else ws
    take = ws.take
    return bind(_qs_into, loss.kernel)(
        params, scores, is_pos, n_pos, neg_rank, coef, take("v", n, np.float64),
        take("idx", n, np.int64), take("rk", n, np.int64), take("pos_values", n_pos, np.float64),
        take("pos_index", n_pos, np.int64), take("spos", n_pos + 1, np.float64),
        take("rank_count", n_pos + 2, np.int64), ws.stack())


def sort_dc_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """np.sort of the negatives, then the same divide and conquer over ranks."""
    return run_sorted(_sort_dc, loss, scores, is_pos, n_pos, neg_rank, coef)
