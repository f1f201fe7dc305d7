"""The default method: ``bucket``, ``bucket_sort`` or ``qs``, chosen by what the input is.

- Many negatives, at least ``max(SORT_BELOW, SORT_PER_POSITIVE * P)``: ``bucket``, which
  settles whole buckets of negatives unsorted (its corner work is small beside N).
- Fewer, spread among the positives (fewer than ``SETTLED_SHARE`` of them at or below the
  lowest positive, as random scores): ``bucket_sort``, which sorts them by buckets.
- Fewer, mostly below every positive, or tied: ``qs``, for every loss. Inside training most
  negatives fall below every positive after a few iterations, and all scores tie at the
  first (the weights are zero): their ranks collapse to P + 1 in a few splits, and sorting
  them is wasted. On the score vectors of cutting-plane trainings on the VOC2011-shaped data
  (classes phoning, walking, reading; P = 179-227, N = 3085-3133; replayed, each method
  writing into a :class:`~qs.inference.Workspace` as the solvers do), us per call: AP
  ``qs`` 54-63, ``bucket`` 72-79, ``bucket_sort`` 83-90; NDCG ``qs`` 78-79, ``bucket``
  81-86, ``bucket_sort`` 86-89.

Measured there, and on the scaling benchmark's random scores at P = 227, 300 and 1000,
N = 2270 to 31623 (where ``bucket_sort`` and ``bucket`` lead).
"""

from qs.inference._core import settled_share
from qs.inference.bucket import bucket_lai
from qs.inference.bucket_sort import bucket_sort_lai
from qs.inference.qs import qs_lai

SORT_BELOW = 8192
SORT_PER_POSITIVE = 24
SETTLED_SHARE = 0.5


def auto_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """The method the rule above picks for this input, run."""
    n_neg = neg_rank.size
    if n_neg >= max(SORT_BELOW, SORT_PER_POSITIVE * n_pos):
        method = bucket_lai
    elif settled_share(scores, is_pos) < SETTLED_SHARE:
        method = bucket_sort_lai
    else:
        method = qs_lai
    return method(loss, scores, is_pos, n_pos, neg_rank, coef, ws)
