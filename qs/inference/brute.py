"""Exhaustive enumeration: the oracle the other methods are tested against.

Tries every assignment of interleaving ranks to the negatives, each negative on its own
(not assuming that the optimum keeps negatives in score order), with positives in score
order, and computes the objective from its definition: the loss of the interleaving plus
``F = (1/PN) sum_{x positive, y negative} R_xy (s_x - s_y)``. When several assignments
share the best objective it returns the first enumerated, so compare its objective, and its
ranks only where the optimum is unique.
"""

import itertools
import math

import numpy as np

from qs.inference._input import scan_and_gather
from qs.inference._output import finish
from qs.inference._prepare import raise_for

#: most values the enumeration holds at once: (P+1)^N assignments times N P comparisons, as
#: float64 (80 MB)
MAX_VALUES = 10**7


def _values(n_pos, n_neg):
    """(P+1)^N N P, the size of the enumeration's largest array; without forming the power
    when N alone rules it out ((P+1)^N >= 2^N)."""
    if n_neg >= MAX_VALUES.bit_length():
        return float("inf")
    return (n_pos + 1) ** n_neg * n_neg * n_pos


def brute_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """The best of all (P+1)^N assignments of ranks to the negatives."""
    n_neg = neg_rank.size
    if _values(n_pos, n_neg) > MAX_VALUES:
        raise ValueError(
            f"method 'brute' enumerates (P+1)^N = {n_pos + 1}^{n_neg} rank assignments of "
            f"P N = {n_pos * n_neg} comparisons each and refuses more than {MAX_VALUES:.0e} "
            "values in all (its memory); use it on small inputs only, or another method."
        )
    neg = np.empty(n_neg)
    err, where, sum_pos, sum_neg, pos_sorted, pos_index, ref = scan_and_gather(
        scores, is_pos, n_pos, neg
    )
    raise_for(err, where, scores)
    ranks = np.array(list(itertools.product(range(1, n_pos + 2), repeat=n_neg)), dtype=np.int64)
    places = np.arange(1, n_pos + 1)
    above = places[None, None, :] < ranks[:, :, None]  # positive k above negative y
    n_above = (~above).sum(axis=1)  # negatives above each positive
    diff = pos_sorted[None, None, :] - neg[None, :, None]
    f = np.where(above, diff, -diff).sum(axis=(1, 2)) / (n_pos * n_neg)
    best = ranks[int(np.argmax(loss.value(n_above) + f))]
    neg_rank[:] = best
    coef[is_pos == 0] = (n_pos + 2 - 2 * best) * (1.0 / (n_pos * n_neg))
    rank_count = np.bincount(best, minlength=n_pos + 2)
    # the negatives' part of the hinge's compensated sum (qs.inference._hinge), in full
    neg_total = math.fsum((n_pos + 1 - best) * (1.0 / (n_pos * n_neg)) * (neg - ref))
    return finish(
        rank_count, neg_total, 0.0, pos_sorted, pos_index, n_neg, coef, sum_pos, sum_neg, ref
    )
