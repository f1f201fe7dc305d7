"""Validation at the boundary and the per-call context every LAI method works from."""

import numpy as np

from qs.inference._core import NOT_FINITE, gather_negatives, scan_input


def as_scores(scores):
    """Scores as a 1-D float64 C-contiguous array (no copy when already so)."""
    arr = np.asarray(scores)
    if arr.ndim != 1:
        raise ValueError(
            f"scores must be a 1-D array of one score per sample; got an array of shape "
            f"{arr.shape}. Flatten it (e.g. scores.ravel()) if it holds one score per sample."
        )
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"scores must be numeric; got dtype {arr.dtype}.")
    return np.ascontiguousarray(arr, dtype=np.float64)


def as_positive_mask(labels, n):
    """Labels as a uint8 mask (1 = positive); accepts bool, or numbers in {1, 0, -1}."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels must be a 1-D array; got an array of shape {arr.shape}.")
    if arr.size != n:
        raise ValueError(
            f"scores and labels must have the same length; got {n} scores and {arr.size} labels."
        )
    if arr.dtype == np.bool_:
        return np.ascontiguousarray(arr).view(np.uint8)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"labels must be bool or numeric (1 positive, 0 or -1 negative); got dtype {arr.dtype}.")
    is_pos = arr == 1
    bad = ~(is_pos | (arr == 0) | (arr == -1))
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(
            f"labels must be binary: 1 (or True) for a positive, 0 or -1 (or False) for a "
            f"negative; got {arr[k]!r} at index {k}."
        )
    return is_pos.view(np.uint8)


class Context:
    """One validated LAI problem: scores, positive mask, counts, sorted positives, the loss.

    ``pos_sorted``: the positives by descending score (tied positives keep input order),
    ``pos_index``: their indices in the input.
    """

    def __init__(self, scores, is_pos, loss=None, n_buckets=0):
        # buckets are laid over the range of a strided sample, so that the histogram is
        # counted in the same pass that validates; scores outside it go to the end buckets
        sample = scores[:: max(1, scores.size // 1024)]
        low, high = float(sample.min()), float(sample.max())
        scale = n_buckets / (high - low) if high > low else 0.0
        if not np.isfinite(scale):
            scale = 0.0
        err, where, n_pos, sum_pos, sum_neg, neg_min, neg_max, pos_sorted, pos_index, count = (
            scan_input(scores, is_pos, low if np.isfinite(low) else 0.0, scale, n_buckets)
        )
        if err == NOT_FINITE:
            raise ValueError(
                f"scores must be finite; got {scores[where]!r} at index {where}. "
                "Remove or impute NaN/inf scores before inference."
            )
        n_neg = scores.size - n_pos
        if n_pos == 0:
            raise ValueError("labels contain no positive sample; a ranking loss needs at least one.")
        if n_neg == 0:
            raise ValueError("labels contain no negative sample; a ranking loss needs at least one.")
        self.scores, self.is_pos, self.loss = scores, is_pos, loss
        self.n_pos, self.n_neg = int(n_pos), int(n_neg)
        self.sum_pos, self.sum_neg = sum_pos, sum_neg
        self.neg_min, self.neg_max = neg_min, neg_max
        self.pos_sorted, self.pos_index = pos_sorted, pos_index
        self.bucket_low, self.bucket_scale, self.bucket_count = low, scale, count
        if loss is not None:
            self.kernel = loss.kernel
            self.params = loss.prepare(self.n_pos, self.n_neg)

        # Large arrays come from numpy: its allocator maps them faster than numba's.
        self.neg_rank = np.empty(self.n_neg, dtype=np.int64)
        self.coef = np.empty(scores.size)

    @property
    def data(self):
        """The arguments every method kernel takes after its own: the problem, then the
        outputs ``neg_rank`` and ``coef`` it fills."""
        return (self.scores, self.is_pos, self.n_pos, self.n_neg, self.pos_sorted,
                self.neg_rank, self.coef)

    def negatives(self):
        """A fresh array of the negatives' scores (input order)."""
        out = np.empty(self.n_neg)
        gather_negatives(self.scores, self.is_pos, out)
        return out

    def sorted_negatives(self):
        """The negatives' scores in descending order (C-contiguous)."""
        return np.ascontiguousarray(np.sort(self.negatives())[::-1])
