"""Ranking metrics of scores: average precision and NDCG with binary relevance.

Both read the ranking that sorts scores in descending order. A positive and a negative
with equal scores are ranked pessimistically (the negative first), so the metric is the
lowest over the orderings the scores allow; scikit-learn treats ties otherwise (AP: one
threshold for the tied block; NDCG: averaged over the tied block), and the two agree
whenever no positive ties a negative.
"""

import numpy as np

from qs.inference._prepare import as_positive_mask, as_scores
from qs.losses import LOSSES

__all__ = ["average_precision", "ndcg", "negatives_above", "voc_average_precision"]


def negatives_above(labels, scores):
    """For each positive in ranking order, how many negatives stand above it."""
    scores = as_scores(scores)
    is_pos = as_positive_mask(labels, scores.size).astype(bool)
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite.")
    if not is_pos.any():
        raise ValueError("labels contain no positive sample; the metric is undefined.")
    order = np.lexsort((is_pos, -scores))  # by descending score, negatives first among ties
    ranked_pos = is_pos[order]
    return np.cumsum(~ranked_pos)[ranked_pos]


def average_precision(labels, scores):
    """Average precision of the ranking by descending score (higher is better)."""
    return 1.0 - LOSSES["ap"].value(negatives_above(labels, scores))


def ndcg(labels, scores):
    """NDCG with binary gains and discount 1/log2(1 + position) (higher is better)."""
    return 1.0 - LOSSES["ndcg"].value(negatives_above(labels, scores))


def voc_average_precision(labels, scores, ignore=None):
    """AP as the PASCAL VOC devkit computes it from VOC2010 on (higher is better).

    The area under the interpolated precision/recall curve: precision made non-increasing
    from the right (each point takes the best precision at any higher recall), summed over
    the recall steps, one step of 1/P per positive. Boxes flagged in ``ignore`` (label 0,
    "difficult") are left out, as the devkit leaves them out. Ties: pessimistic, as above
    (the devkit's stable sort instead keeps the input order among equal scores). Unlike
    scikit-learn's `average_precision_score` (no interpolation), this is never below the
    plain AP of the same ranking.
    """
    scores = as_scores(scores)
    is_pos = as_positive_mask(labels, scores.size).astype(bool)
    if ignore is not None:
        keep = ~np.asarray(ignore, dtype=bool)
        if keep.shape != scores.shape:
            raise ValueError(f"ignore must be a 1-D mask of one flag per score; got shape "
                             f"{keep.shape} for {scores.size} scores.")
        scores, is_pos = scores[keep], is_pos[keep]
    n_above = negatives_above(is_pos, scores)
    precision = np.arange(1, n_above.size + 1) / (np.arange(1, n_above.size + 1) + n_above)
    return float(np.maximum.accumulate(precision[::-1]).mean())
