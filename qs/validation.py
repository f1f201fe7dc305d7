"""Checks of scores and binary labels at the boundary, for numpy arrays and torch tensors.

Every public function of the package that takes one score per sample and binary labels
(inference, metrics, solvers, estimators, the torch losses and the surrogates) checks them
here, so that a bad input gets the same message wherever it enters. Labels: a positive is 1
or True, a negative 0, -1 or False. Scores: finite numbers. The tensor checks use the
tensors' own methods and import torch only to convert labels given as arrays, so that
``import qs`` never imports torch.
"""

import numpy as np
import numpy.typing as npt

from qs._numba import jit

__all__ = [
    "as_positive_mask",
    "as_positive_mask2d",
    "as_positive_tensor",
    "as_query_rows",
    "as_scores",
    "check_counts",
    "check_finite",
    "check_finite_tensor",
    "check_scores",
    "label_check",
    "not_finite",
]

LABELS = "1 (or True) for a positive, 0 or -1 (or False) for a negative"


def not_finite(value: object, where: object, before: str) -> ValueError:
    """The ValueError of a score that is NaN or infinite, for the caller to raise.

    Parameters
    ----------
    value : object
        The score.
    where : object
        Its index: an int, or a tuple for rows of queries.
    before : str
        What the scores are for ("the loss").

    Returns
    -------
    ValueError
        The error, not raised.

    Examples
    --------
    >>> str(not_finite(float("nan"), 3, "inference"))
    'scores must be finite; got nan at index 3. Remove or impute NaN/inf scores before inference.'
    """
    return ValueError(
        f"scores must be finite; got {value!r} at index {where}. Remove or "
        f"impute NaN/inf scores before {before}."
    )


def _not_binary(value, where):
    """`where`: an index, or a phrase such as "query 2, sample 5"."""
    where = where if isinstance(where, str) else f"index {where}"
    return ValueError(f"labels must be binary: {LABELS}; got {value!r} at {where}.")


def _not_numeric(dtype):
    return ValueError(
        f"labels must be bool or numeric (1 positive, 0 or -1 negative); got dtype {dtype}."
    )


# ---------------------------------------------------------------------------- numpy


def as_scores(scores: npt.ArrayLike) -> np.ndarray:
    """Scores as a 1-D float64 C-contiguous array, without a copy when already so.

    Finiteness is checked by the caller (the inference kernels check it in their first
    pass).

    Parameters
    ----------
    scores : array-like of shape (n,)
        One number per sample: float, int, unsigned or bool.

    Returns
    -------
    ndarray of shape (n,), float64
        The scores.

    Raises
    ------
    ValueError
        When the scores are not 1-D or not numeric.

    Examples
    --------
    >>> as_scores([3, 1, 2])
    array([3., 1., 2.])
    >>> as_scores([[0.5, 0.2]])
    Traceback (most recent call last):
        ...
    ValueError: scores must be a 1-D array of one score per sample; got an array of shape ...
    """
    arr = np.asarray(scores)
    if arr.ndim != 1:
        raise ValueError(
            f"scores must be a 1-D array of one score per sample; got an array of shape "
            f"{arr.shape}. Flatten it (e.g. scores.ravel()) if it holds one score per sample."
        )
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"scores must be numeric; got dtype {arr.dtype}.")
    return np.ascontiguousarray(arr, dtype=np.float64)


def check_finite(scores: np.ndarray, before: str) -> None:
    """Refuse a 1-D score array holding NaN or inf, naming the first (`not_finite`).

    Parameters
    ----------
    scores : ndarray of shape (n,)
        The scores.
    before : str
        What the scores are for, for the message.

    Raises
    ------
    ValueError
        At the first NaN or infinite score.

    Examples
    --------
    >>> check_finite(np.array([0.5, 1.0]), "the metric")
    >>> check_finite(np.array([0.5, np.inf]), "the metric")
    Traceback (most recent call last):
        ...
    ValueError: scores must be finite; got np.float64(inf) at index 1. Remove or impute ...
    """
    finite = np.isfinite(scores)
    if not finite.all():
        where = int(np.flatnonzero(~finite)[0])
        raise not_finite(scores[where], where, before)


def _numeric_labels(arr):
    """Numeric labels as `label_check` takes them: C-contiguous, in native byte order,
    float16 widened to float32 (no copy when already so)."""
    if arr.dtype.kind not in "fiu":
        raise _not_numeric(arr.dtype)
    if not arr.dtype.isnative or arr.dtype == np.float16:  # types the kernels cannot take
        arr = arr.astype(
            np.float32
            if arr.dtype.kind == "f" and arr.itemsize == 2
            else arr.dtype.newbyteorder("=")
        )
    return np.ascontiguousarray(arr)


def as_positive_mask(labels: npt.ArrayLike, n: int) -> np.ndarray:
    """Binary labels as a uint8 mask, 1 at the positives; to be read only.

    Bool labels, and 1-byte labels of 1 and 0, are viewed, not copied.

    Parameters
    ----------
    labels : array-like of shape (n,)
        Bool, or numbers among 1, 0 and -1 of any byte order and width: 1 or True for a
        positive, 0 or -1 or False for a negative.
    n : int
        The number of scores they go with.

    Returns
    -------
    ndarray of shape (n,), uint8
        1 at the positives, 0 elsewhere.

    Raises
    ------
    ValueError
        When the labels are not 1-D, not ``n`` long, or not binary.

    Examples
    --------
    >>> as_positive_mask([1, -1, 0, 1], 4)
    array([1, 0, 0, 1], dtype=uint8)
    >>> as_positive_mask([1, 2], 2)
    Traceback (most recent call last):
        ...
    ValueError: labels must be binary: 1 (or True) for a positive, ...; got np.int64(2) at index 1.
    """
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels must be a 1-D array; got an array of shape {arr.shape}.")
    if arr.size != n:
        raise ValueError(
            f"scores and labels must have the same length; got {n} scores and {arr.size} labels."
        )
    if arr.dtype == np.bool_:
        return np.ascontiguousarray(arr).view(np.uint8)
    arr = _numeric_labels(arr)
    bad, minus = label_check(arr)
    if bad >= 0:
        raise _not_binary(arr[bad], bad)
    if arr.itemsize == 1 and not minus:  # already 1 and 0 bytes: no copy
        return arr.view(np.uint8)
    return (arr == 1).view(np.uint8)


def as_positive_mask2d(labels: npt.ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """Binary labels of rows of queries as a uint8 mask; a bad label named by query and sample.

    Parameters
    ----------
    labels : array-like of shape (queries, n)
        Bool, or numbers among 1, 0 and -1.
    shape : tuple of int
        The scores' shape, which the labels must have.

    Returns
    -------
    ndarray of shape (queries, n), uint8
        1 at the positives, 0 elsewhere.

    Raises
    ------
    ValueError
        When the shapes differ or a label is not binary.

    Examples
    --------
    >>> as_positive_mask2d([[1, 0], [-1, 1]], (2, 2)).tolist()
    [[1, 0], [0, 1]]
    >>> as_positive_mask2d([[1, 0], [3, 1]], (2, 2))
    Traceback (most recent call last):
        ...
    ValueError: labels must be binary: ...; got np.int64(3) at query 1, sample 0.
    """
    arr = np.asarray(labels)
    if arr.shape != shape:
        raise ValueError(
            f"scores and labels must have the same shape; got scores {shape} and "
            f"labels {arr.shape}."
        )
    if arr.dtype == np.bool_:
        return np.ascontiguousarray(arr).view(np.uint8)
    arr = _numeric_labels(arr)
    bad, _ = label_check(arr.reshape(-1))
    if bad >= 0:
        qq, kk = divmod(int(bad), shape[1])
        raise _not_binary(arr[qq, kk], f"query {qq}, sample {kk}")
    return (arr == 1).view(np.uint8)


def check_counts(n_pos: int, n_neg: int) -> None:
    """Refuse labels without a positive or without a negative: a ranking needs both.

    Parameters
    ----------
    n_pos : int
        The number of positives.
    n_neg : int
        The number of negatives.

    Raises
    ------
    ValueError
        When either is 0.

    Examples
    --------
    >>> check_counts(2, 3)
    >>> check_counts(0, 3)
    Traceback (most recent call last):
        ...
    ValueError: labels contain no positive sample; a ranking loss needs at least one.
    """
    if n_pos == 0:
        raise ValueError("labels contain no positive sample; a ranking loss needs at least one.")
    if n_neg == 0:
        raise ValueError("labels contain no negative sample; a ranking loss needs at least one.")


@jit
def label_check(labels):
    """(index of the first label outside {1, 0, -1} or -1, whether any label is -1). The
    loop has no branch, so that it vectorises; the index is searched only on failure."""
    bad = False
    minus = False
    for k in range(labels.size):
        y = labels[k]
        bad |= (y != 1) & (y != 0) & (y != -1)
        minus |= y == -1
    if bad:
        for k in range(labels.size):
            y = labels[k]
            if y != 1 and y != 0 and y != -1:
                return k, minus
    return -1, minus


# ---------------------------------------------------------------------------- torch


def check_scores(scores):
    """Refuse anything but a floating-point torch tensor of 1 or 2 dimensions.

    These are the score tensors every rank loss of the package takes (`qs.torch`,
    `qs.surrogates`).

    Parameters
    ----------
    scores : torch.Tensor
        (n,) or (queries, n) scores.

    Raises
    ------
    TypeError
        When ``scores`` is not a tensor.
    ValueError
        When it is not floating-point, or not 1-D or 2-D.

    Examples
    --------
    >>> import torch
    >>> check_scores(torch.zeros(2, 3))
    >>> check_scores(torch.zeros(3, dtype=torch.int64))
    Traceback (most recent call last):
        ...
    ValueError: scores must be a floating-point tensor; got dtype torch.int64.
    """
    import torch

    if not isinstance(scores, torch.Tensor):
        raise TypeError(f"scores must be a torch.Tensor; got {type(scores).__name__}.")
    if not scores.is_floating_point():
        raise ValueError(f"scores must be a floating-point tensor; got dtype {scores.dtype}.")
    if scores.ndim not in (1, 2):
        raise ValueError(
            f"scores must be 1-D (n,) or 2-D (queries, n); got shape {tuple(scores.shape)}."
        )


def check_finite_tensor(scores, before="the loss"):
    """Refuse a score tensor holding NaN or inf; one reduction when all are finite.

    Parameters
    ----------
    scores : torch.Tensor
        The scores.
    before : str, default "the loss"
        What the scores are for, for the message.

    Raises
    ------
    ValueError
        At the first NaN or infinite score, naming its index.

    Examples
    --------
    >>> import torch
    >>> check_finite_tensor(torch.tensor([[0.5, 1.0], [2.0, float("nan")]]))
    Traceback (most recent call last):
        ...
    ValueError: scores must be finite; got nan at index (1, 1). Remove or impute NaN/inf ...
    """
    detached = scores.detach()
    if detached.sum().isfinite():  # NaN and inf reach the sum
        return
    finite = detached.isfinite()
    if not finite.all():
        where = tuple(int(k) for k in (~finite).nonzero()[0])
        raise not_finite(scores[where].item(), where, before)


def as_positive_tensor(labels, scores):
    """Binary labels as a bool tensor on the scores' device, True at the positives.

    Parameters
    ----------
    labels : torch.Tensor or array-like
        Bool, or numbers among 1, 0 and -1, of the scores' shape.
    scores : torch.Tensor
        The scores they go with.

    Returns
    -------
    torch.Tensor
        Bool, of the scores' shape and on their device.

    Raises
    ------
    ValueError
        When the shapes differ, or the labels are not numeric or not binary.

    Examples
    --------
    >>> import torch
    >>> as_positive_tensor([1, 0, -1], torch.zeros(3))
    tensor([ True, False, False])
    """
    import torch

    if not isinstance(labels, torch.Tensor):
        labels = np.asarray(labels)
        if labels.dtype.kind not in "biuf":
            raise _not_numeric(labels.dtype)
        labels = torch.from_numpy(labels)
    if tuple(labels.shape) != tuple(scores.shape):
        raise ValueError(
            f"scores and labels must have the same shape; got scores "
            f"{tuple(scores.shape)} and labels {tuple(labels.shape)}."
        )
    labels = labels.to(scores.device)
    if labels.dtype == torch.bool:
        return labels
    if labels.is_complex() or not (
        labels.is_floating_point()
        or labels.dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
    ):
        raise _not_numeric(labels.dtype)
    bad = (labels != 1) & (labels != 0) & (labels != -1)
    if bad.any():
        where = tuple(int(k) for k in bad.nonzero()[0])
        raise _not_binary(labels[where].item(), where)
    return labels == 1


def as_query_rows(scores, labels):
    """Scores and labels checked in full, as rows of queries: a 1-D input is one query.

    The scores are checked by `check_scores` and `check_finite_tensor`, the labels by
    `as_positive_tensor`.

    Parameters
    ----------
    scores : torch.Tensor
        (n,) or (queries, n) scores.
    labels : torch.Tensor or array-like
        Binary labels of the scores' shape.

    Returns
    -------
    scores : torch.Tensor of shape (queries, n)
        The scores.
    positives : torch.Tensor of shape (queries, n), bool
        True at the positives.

    Examples
    --------
    >>> import torch
    >>> rows, positives = as_query_rows(torch.tensor([0.5, 0.2, 0.9]), [1, 0, 0])
    >>> rows.shape, positives.tolist()
    (torch.Size([1, 3]), [[True, False, False]])
    """
    check_scores(scores)
    pos = as_positive_tensor(labels, scores)
    check_finite_tensor(scores)
    return (scores[None], pos[None]) if scores.ndim == 1 else (scores, pos)
