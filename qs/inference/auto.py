"""The default method: ``bucket``, ``bucket_sort`` or ``qs``, chosen by what the input is.

- Many negatives, at least ``max(SORT_BELOW, SORT_PER_POSITIVE * P)``: ``bucket``, which
  settles whole buckets of negatives unsorted (its corner work is small beside N).
- Fewer: one kernel gathers the negatives (split around a pivot in the same pass, as
  ``qs`` does) and sorts the positives, the first steps of both other methods, then reads
  the share of negatives at or below the lowest positive on a sample of the gathered ones
  (in cache, so the choice costs about 0.1 us); the work arrays of both are cut from two
  buffers of the workspace, so that the call costs what a call of ``qs`` costs. Below
  ``SETTLED_SHARE`` (spread among the positives, as random scores): ``bucket_sort``, which
  sorts them by buckets. Otherwise (mostly below every positive, or tied): ``qs``, for every
  loss. Inside training most negatives fall below every positive after a few iterations,
  and all scores tie at the first (the weights are zero): their ranks collapse to P + 1 in a
  few splits, and sorting them is wasted. On the score vectors of cutting-plane trainings
  on the VOC2011-shaped data (classes phoning, walking, reading; P = 179-227, N =
  3085-3133; replayed, each method writing into a :class:`~qs.inference.Workspace` as the
  solvers do; ``qsrank bench --replay --repeats 9``), us per call: AP ``qs`` 40-45, the
  default 41-45, ``bucket`` 57-61, ``bucket_sort`` 69-71; NDCG ``qs`` 62-68, the default
  62-69, ``bucket_sort`` 77-81, ``bucket`` 81-87 (the 0-1 call 16-17).

Measured there, and on the scaling benchmark's random scores at P = 227, 300 and 1000,
N = 2270 to 30000 (where ``bucket_sort`` leads below the size rule and ``bucket`` above it;
the default within 4% of the faster of them).
"""

import numpy as np

from qs._numba import bind, jit
from qs.inference._core import OK, failed, settled_share, unsplit
from qs.inference.bucket import bucket_lai
from qs.inference.bucket_sort import bucket_sort_gathered, histogram_size, new_work
from qs.inference.qs import (
    check_size,
    gather_split,
    packed_floats,
    packed_ints,
    qs_gathered,
    unpack,
)

SORT_BELOW = 8192
SORT_PER_POSITIVE = 24
SETTLED_SHARE = 0.5


@jit
def _auto_into(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, key, rk, pos_values,
               pos_index, spos, rank_count, stack, order, tmp_v, tmp_i, v_sorted, key_sorted,
               count):
    """``qs`` or ``bucket_sort`` by the share of settled negatives, on the work arrays of
    ``bucket_sort`` (which hold those of ``qs``)."""
    err, where, sum_pos, sum_neg, ref, pivot, above = gather_split(
        scores, is_pos, v, key, pos_values, pos_index, order, tmp_v, tmp_i)
    if err != OK:
        return failed(err, where)
    if settled_share(v, pos_values[n_pos - 1]) >= SETTLED_SHARE:
        return qs_gathered(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, key, rk,
                           pos_values, pos_index, spos, rank_count, stack, sum_pos, sum_neg, ref,
                           pivot, above)
    unsplit(v, key, above)  # bucket_sort's stable sort needs tied negatives in input order
    return bucket_sort_gathered(inc, params, scores, is_pos, n_pos, neg_rank, coef, v, key, rk,
                                pos_values, pos_index, spos, rank_count, v_sorted, key_sorted,
                                count, sum_pos, sum_neg, ref)


def _floats(n_neg, n_pos):
    return packed_floats(n_neg, n_pos) + n_neg


def _ints(n_neg, n_pos):
    return packed_ints(n_neg, n_pos) + n_neg + histogram_size(n_neg, n_pos)


#: the work arrays of :func:`_auto_into` as two buffers: those of ``qs``
#: (:data:`qs.inference.qs.PACKED`, at the same places), then ``bucket_sort``'s sorted
#: negatives, their keys and its histogram
PACKED = (("floats", _floats, np.float64), ("ints", _ints, np.int64))


@jit
def _auto_packed(inc, params, scores, is_pos, n_pos, neg_rank, coef, floats, ints):
    """:func:`_auto_into` on the buffers of :data:`PACKED`."""
    n_neg = neg_rank.size
    f, i = packed_floats(n_neg, n_pos), packed_ints(n_neg, n_pos)
    n_buckets = histogram_size(n_neg, n_pos)
    return _auto_into(inc, params, scores, is_pos, n_pos, neg_rank, coef,
                      *unpack(floats, ints, n_neg, n_pos), floats[f : f + n_neg],
                      ints[i : i + n_neg], ints[i + n_neg : i + n_neg + n_buckets])


@jit
def _auto(inc, params, scores, is_pos, n_pos, n_buckets, neg_rank, coef):
    """:func:`_auto_into` with its work arrays allocated here."""
    n_neg = scores.size - n_pos
    return _auto_into(inc, params, scores, is_pos, n_pos, neg_rank, coef,
                      *new_work(n_pos, n_neg, n_buckets))


def auto_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """The method the rule above picks for this input, run."""
    n_neg = neg_rank.size
    if n_neg >= SORT_BELOW and n_neg >= SORT_PER_POSITIVE * n_pos:
        return bucket_lai(loss, scores, is_pos, n_pos, neg_rank, coef, ws)
    check_size(scores)
    params = loss.prepare(n_pos, n_neg)
    if ws is None:  # allocated inside the kernel: faster than a Workspace's arrays
        return bind(_auto, loss.kernel)(params, scores, is_pos, n_pos,
                                        histogram_size(n_neg, n_pos), neg_rank, coef)
    return bind(_auto_packed, loss.kernel)(params, scores, is_pos, n_pos, neg_rank, coef,
                                           *ws.arrays(PACKED, n_neg, n_pos))
