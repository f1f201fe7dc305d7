"""The inference's own checks (outputs, sizes, the kernels' error codes) and the driver of
the methods that sort the negatives; scores and labels are checked in `qs.validation`."""

import numpy as np

from qs._numba import bind
from qs.inference._input import NOT_FINITE, scan_and_gather
from qs.validation import not_finite


def output_arrays(out, n_neg, n, zero_one, inputs):
    """The result's (neg_rank, coef): new arrays, or those of ``out`` once checked (see
    `qs.inference.lai`); neg_rank is None for the 0-1 loss. ``inputs``: the arrays the
    kernels read, which the outputs must not overlap."""
    if out is None:
        return None if zero_one else np.empty(n_neg, dtype=np.int32), np.empty(n)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ValueError(f"out must be a pair (neg_rank, coef); got {type(out).__name__}.")
    checks = [("coef", out[1], np.float64, (n,))]
    if not zero_one:
        checks.insert(0, ("neg_rank", out[0], np.int32, (n_neg,)))
    elif out[0] is not None:
        raise ValueError(
            "out[0] (neg_rank) must be None for the 0-1 loss, which ranks no negative."
        )
    for name, arr, dtype, shape in checks:
        if not (
            isinstance(arr, np.ndarray)
            and arr.dtype == dtype
            and arr.shape == shape
            and arr.flags.c_contiguous
            and arr.flags.writeable
        ):
            got = (
                f"{arr.dtype} array of shape {arr.shape}"
                if isinstance(arr, np.ndarray)
                else type(arr).__name__
            )
            raise ValueError(
                f"out {name} must be a writeable C-contiguous {np.dtype(dtype)} "
                f"array of shape {shape}; got {got}."
            )
    arrays = [arr for _, arr, _, _ in checks]
    for k, a in enumerate(arrays):
        if any(np.may_share_memory(a, b) for b in arrays[k + 1 :] + list(inputs)):
            raise ValueError("out arrays must not overlap each other, the scores or the labels.")
    return out[0], out[1]


def check_size(scores):
    """The keys of `scan_gather` hold input indices in 32 bits."""
    if scores.size >= 1 << 32:
        raise ValueError(
            f"this method takes inputs of fewer than 2^32 samples; got "
            f"{scores.size}. Use method='bucket'."
        )


def raise_for(err, where, scores):
    """Turn a kernel's error code into a ValueError."""
    if err == NOT_FINITE:
        raise not_finite(scores[where], where, "inference")


def sorted_negatives(scores, is_pos, n_pos):
    """The negatives in descending order (np.sort), with the positives: (v, sum_pos,
    sum_neg, pos_sorted, pos_index, ref); the sums of scores minus the reference score
    ``ref``."""
    v = np.empty(scores.size - n_pos)
    err, where, sum_pos, sum_neg, pos_sorted, pos_index, ref = scan_and_gather(
        scores, is_pos, n_pos, v
    )
    raise_for(err, where, scores)
    v = np.ascontiguousarray(np.sort(v)[::-1])
    return v, sum_pos, sum_neg, pos_sorted, pos_index, ref


def run_sorted(kernel, loss, scores, is_pos, n_pos, neg_rank, coef, ws=None):
    """Run a method ``kernel(inc, params, v, rk, scores, is_pos, pos_sorted, pos_index,
    neg_rank, coef, sum_pos, sum_neg, ref)`` on the sorted negatives ``v``, scores measured
    from the reference score ``ref``; the kernel ends with
    `finish_sorted`. ``ws``: taken as every method's driver takes
    it; these methods use no work arrays."""
    v, sum_pos, sum_neg, pos_sorted, pos_index, ref = sorted_negatives(scores, is_pos, n_pos)
    rk = np.empty(v.size, dtype=np.int64)
    params = loss.prepare(n_pos, v.size)
    return bind(kernel, loss.kernel)(
        params, v, rk, scores, is_pos, pos_sorted, pos_index, neg_rank, coef, sum_pos, sum_neg, ref
    )
