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
from qs.inference.workspace import Workspace
from qs.losses import QSLoss

#: most values the enumeration holds at once: (P+1)^N assignments times N P comparisons, as
#: float64 (80 MB)
MAX_VALUES = 10**7


def _values(n_pos, n_neg):
    """(P+1)^N N P, the size of the enumeration's largest array; without forming the power
    when N alone rules it out ((P+1)^N >= 2^N)."""
    if n_neg >= MAX_VALUES.bit_length():
        return float("inf")
    return (n_pos + 1) ** n_neg * n_neg * n_pos


def brute_lai(
    loss: QSLoss,
    scores: np.ndarray,
    is_pos: np.ndarray,
    n_pos: int,
    neg_rank: np.ndarray,
    coef: np.ndarray,
    ws: Workspace | None = None,
) -> tuple[int, int, float, float, np.ndarray, float]:
    """The best of all (P+1)^N assignments of ranks to the negatives (``ws`` unused).

    Parameters
    ----------
    loss : QSLoss
        The loss (its increment kernel and its ``prepare``).
    scores : ndarray of float64, shape (n,)
        The scores.
    is_pos : ndarray of uint8, shape (n,)
        1 at the positives, 0 at the negatives.
    n_pos : int
        The number of positives, at least 1 and less than n.
    neg_rank : ndarray of int32, shape (n - n_pos,)
        Written: the interleaving rank of each negative, in input order.
    coef : ndarray of float64, shape (n,)
        Written: the coefficients of the joint feature map.
    ws : Workspace, optional
        Work arrays reused from call to call (`qs.inference.Workspace`).

    Returns
    -------
    tuple
        (error code, the index of a non-finite score or -1, the sums of the positives' and
        the negatives' scores less the reference score, the negatives above each positive
        (int64), the hinge's score term ``F(R_bar) - F(R*)``), as `qs.inference.lai` reads
        them.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.inference.brute import brute_lai
    >>> from qs.losses import get_loss
    >>> scores, is_pos = np.array([2.0, 1.0, 0.5, -1.0]), np.array([1, 0, 1, 0], dtype=np.uint8)
    >>> neg_rank, coef = np.empty(2, dtype=np.int32), np.empty(4)
    >>> err, where, *_ = brute_lai(get_loss("ap"), scores, is_pos, 2, neg_rank, coef)
    >>> neg_rank.tolist()
    [2, 3]
    """
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
