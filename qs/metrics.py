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

__all__ = ["average_precision", "ndcg", "negatives_above"]


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
