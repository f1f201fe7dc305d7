"""The default method: ``bucket``, ``bucket_sort`` or ``qs``, chosen by what the input is.

- Many negatives, at least ``max(SORT_BELOW, SORT_PER_POSITIVE * P)``: ``bucket``, which
  settles whole buckets of negatives unsorted (its corner work is small beside N).
- Fewer, spread among the positives (fewer than ``SETTLED_SHARE`` of them at or below the
  lowest positive, as random scores): ``bucket_sort``, which sorts them by buckets.
- Fewer, mostly below every positive, or tied: ``qs`` for AP, ``bucket`` for other losses.
  Inside training most negatives fall below every positive after a few iterations, and all
  scores tie at the first (the weights are zero): their ranks collapse to P + 1 in a few
  splits, and sorting them is wasted. There ``qs`` was 2-13% faster than ``bucket`` for AP,
  and 2-7% slower for NDCG.

Measured on the score vectors of cutting-plane trainings on the VOC2011-shaped data
(replayed against every method), and on the scaling benchmark's random scores at P = 227,
300 and 1000, N = 2270 to 31623.
"""

import numpy as np

from qs._numba import bind, jit
from qs.inference._core import settled_share
from qs.inference.bucket import MAX_BUCKETS, _bucket, bucket_lai, n_buckets_for
from qs.inference.bucket_sort import _bucket_sort
from qs.inference.qs import _qs
from qs.losses import APLoss

SORT_BELOW = 8192
SORT_PER_POSITIVE = 24
SETTLED_SHARE = 0.5


@jit
def _auto(inc, params, scores, is_pos, n_pos, n_buckets, n_sort_buckets, is_ap, neg_rank, coef):
    """The choice among the small inputs and the method it picks, in one call from Python."""
    if settled_share(scores, is_pos) >= SETTLED_SHARE:
        if is_ap:
            n_neg = scores.size - n_pos
            return _qs(inc, params, scores, is_pos, n_pos, neg_rank, coef, np.empty(n_neg),
                       np.empty(n_neg, dtype=np.int64), np.empty(n_neg, dtype=np.int64))
        return _bucket(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef)
    return _bucket_sort(inc, params, scores, is_pos, n_pos, n_sort_buckets, neg_rank, coef)


def auto_lai(loss, scores, is_pos, n_pos, neg_rank, coef):
    """``bucket`` (on threads from 2^21 samples) for many negatives, else the choice above."""
    n_neg = neg_rank.size
    if n_neg >= max(SORT_BELOW, SORT_PER_POSITIVE * n_pos):
        return bucket_lai(loss, scores, is_pos, n_pos, neg_rank, coef)
    params = loss.prepare(n_pos, n_neg)
    n_sort_buckets = int(min(MAX_BUCKETS, max(16, n_neg)))
    return bind(_auto, loss.kernel)(params, scores, is_pos, n_pos, n_buckets_for(n_pos, n_neg),
                                    n_sort_buckets, isinstance(loss, APLoss), neg_rank, coef)
