"""Each image's best few boxes under given weights, in one pass over the boxes: the working
sets of latent training out of core (`qs.ssvm.latent`, `qs.ssvm.lockstep`).

Bags, counts and schedulers as [qs.detection.score_bags][] takes them, and the scores
are its scores to the bit (the same blocks, the same products), so the first of an image's
top boxes is its best box.
"""

import numbers
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from qs.detection import check_flat, check_padded, dask_parts, flat_parts, padded_argmax, sub_blocks

__all__ = ["ClassTopBoxes", "TopBoxes", "class_top_boxes", "top_boxes"]


class TopBoxes(NamedTuple):
    """Outcome of `top_boxes`, per image under one weight vector.

    Attributes
    ----------
    index : ndarray of shape (n, k)
        Each image's ``k`` best boxes (int64; best first, the first among equal scores
        first; -1 past an image's box count).
    rows : ndarray of shape (n, k, d)
        Their features (float64; zeros past the count).
    score : ndarray of shape (n, k)
        Their scores (-inf past the count).
    next_score : ndarray of shape (n,)
        The best score of the boxes left out (-inf when none is).
    mean : ndarray of shape (n, d)
        The image's mean box.
    spread : ndarray of shape (n,)
        The largest distance of one of its boxes from that mean.

    Examples
    --------
    >>> features = np.array([[[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]],
    ...                      [[3.0, 1.0], [0.0, 0.0], [0.0, 0.0]]])
    >>> top = top_boxes(features, [2, 1], [1.0, 1.0], 1)
    >>> top.rows.tolist(), top.next_score.tolist(), top.mean.tolist()
    ([[[0.0, 2.0]], [[3.0, 1.0]]], [1.0, -inf], [[0.5, 1.0], [3.0, 1.0]])
    """

    index: np.ndarray  # type: ignore[assignment]  # the field's name, shadowing tuple.index
    rows: np.ndarray
    score: np.ndarray
    next_score: np.ndarray
    mean: np.ndarray
    spread: np.ndarray


def top_boxes(
    features: Any, counts: npt.ArrayLike, w: npt.ArrayLike, k: int, *, scheduler: Any = None
) -> TopBoxes:
    """The ``k`` best boxes of every image under weights ``w``, in one pass over the boxes.

    With them comes what bounds the scores of the boxes left out under other weights: a box
    ``x`` left out scores ``x . v <= next_score + mean . (v - w) + spread * |v - w|`` for any
    ``v`` (as ``x . (v - w) = mean . (v - w) + (x - mean) . (v - w)``).

    Parameters
    ----------
    features : ndarray, dask array or zarr array
        The bags, padded or flat, as [qs.detection.score_bags][] takes them.
    counts : array_like of shape (n_images,)
        Valid boxes per image.
    w : array_like of shape (d,)
        The weights.
    k : int
        Boxes kept per image (>= 1).
    scheduler : str, distributed.Client or None, default None
        For Dask input, as [qs.detection.score_bags][] takes it.

    Returns
    -------
    TopBoxes
        Per image its best boxes; the first column is [qs.detection.score_bags][]'s best
        box.

    Raises
    ------
    ValueError
        On bad bags, ``w`` of the wrong length or not finite, or ``k < 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.top_boxes import top_boxes
    >>> features = np.array([[[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]],
    ...                      [[3.0, 1.0], [0.0, 0.0], [0.0, 0.0]]])
    >>> top = top_boxes(features, [2, 1], [1.0, 1.0], 2)
    >>> top.index.tolist(), top.score.tolist()
    ([[1, 0], [0, -1]], [[2.0, 1.0], [4.0, -inf]])
    """
    flat = isinstance(features, np.ndarray) and features.ndim == 2
    features, counts = check_flat(features, counts) if flat else check_padded(features, counts)
    W = np.ascontiguousarray(np.asarray(w, dtype=np.float64).reshape(-1, 1))
    if W.shape[0] != features.shape[-1] or not np.isfinite(W).all():
        raise ValueError(
            f"w must hold {features.shape[-1]} finite weights; got shape {np.shape(w)}."
        )
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}.")
    options = {"k": int(k)}
    if flat:
        parts = flat_parts(features, counts, W, None, _top_block, options)
    elif isinstance(features, np.ndarray):
        parts = [_top_block(features, counts, W, None, 0, **options)]
    else:
        parts = dask_parts(features, counts, W, None, _top_block, options, scheduler)
    return TopBoxes(*map(np.concatenate, zip(*parts)))


def _top_block(block, counts, W, boxes, first_image, *, k):
    """`TopBoxes` fields of the images of one block (``boxes`` unused)."""
    n, k_max, d = block.shape
    index, rows = np.full((n, k), -1, dtype=np.int64), np.zeros((n, k, d))
    score, next_score = np.full((n, k), -np.inf), np.full(n, -np.inf)
    mean, spread = np.empty((n, d)), np.empty(n)
    kept = min(k, k_max)
    for a, b, sub, scores in sub_blocks(block, counts, W, first_image):
        valid = np.arange(k_max) < counts[a:b, None]
        scores = np.where(valid, scores[:, :, 0], -np.inf)
        order = np.argsort(-scores, axis=1, kind="stable")  # ties: the first box first
        taken = np.arange(kept) < counts[a:b, None]
        index[a:b, :kept] = np.where(taken, order[:, :kept], -1)
        score[a:b, :kept] = np.take_along_axis(scores, order[:, :kept], axis=1)
        rows[a:b, :kept] = (
            np.take_along_axis(sub, order[:, :kept, None], axis=1) * taken[:, :, None]
        )
        if k < k_max:
            next_score[a:b] = np.take_along_axis(scores, order[:, k : k + 1], axis=1)[:, 0]
        mean[a:b] = np.einsum("ikd,ik->id", sub, valid) / counts[a:b, None]
        away = sub - mean[a:b, None, :]
        spread[a:b] = np.where(valid, np.sqrt(np.einsum("ikd,ikd->ik", away, away)), 0).max(axis=1)
    return index, rows, score, next_score, mean, spread


class ClassTopBoxes(NamedTuple):
    """Outcome of `class_top_boxes`, per image and class (a column of ``W``).

    The boxes the caller lacks are those among every class's top boxes, the boxes
    ``gather`` named and the checked best boxes that differ from the given choice, less
    those ``held`` names, each (image, box) once in image order.

    Attributes
    ----------
    index : ndarray of shape (n, c, k)
        The class's ``k`` best boxes (int64; best first, the first among equal scores
        first; -1 past an image's box count).
    score : ndarray of shape (n, c, k)
        Their scores (-inf past the count).
    best : ndarray of shape (n, t)
        Per column of the checked weights, each image's best box (int64).
    image : ndarray of shape (u,)
        The image of each box the caller lacks (int64).
    box : ndarray of shape (u,)
        Its box index within the image (int64).
    rows : list of ndarray
        Arrays of shape (m, d), one per block of images, whose rows in turn are those
        boxes' features, in the input's type (a float16 box stays float16: the working
        sets of every class at half the bytes of float32).

    Examples
    --------
    >>> features = np.array([[[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]],
    ...                      [[3.0, 1.0], [0.0, 0.0], [0.0, 0.0]]])
    >>> top = class_top_boxes(features, [2, 1], np.array([[1.0, -1.0], [1.0, 0.0]]), 1)
    >>> top.score[:, :, 0].tolist(), [rows.tolist() for rows in top.rows]
    ([[2.0, 0.0], [4.0, -3.0]], [[[0.0, 2.0], [3.0, 1.0]]])
    """

    index: np.ndarray  # type: ignore[assignment]  # the field's name, shadowing tuple.index
    score: np.ndarray
    best: np.ndarray
    image: np.ndarray
    box: np.ndarray
    rows: list


def class_top_boxes(
    features: Any,
    counts: npt.ArrayLike,
    W: npt.ArrayLike,
    k: int,
    *,
    gather: npt.ArrayLike | None = None,
    check: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
    held: npt.ArrayLike | None = None,
    scheduler: Any = None,
) -> ClassTopBoxes:
    """Every class's best boxes of every image, and the rows the caller lacks, in one pass.

    The pass of latent training with all classes in lockstep
    (`qs.ssvm.lockstep.latent_lockstep`).

    Parameters
    ----------
    features : ndarray, dask array or zarr array
        The bags, padded or flat, as [qs.detection.score_bags][] takes them.
    counts : array_like of shape (n_images,)
        Valid boxes per image.
    W : array_like of shape (d, c)
        Each class's weights.
    k : int
        Boxes kept per image and class (>= 1).
    gather : array_like of shape (n_images, g) or None, default None
        Boxes whose features to return too (box indices, -1 for none).
    check : tuple of two array_like or None, default None
        ``(V, chosen)``: weights ``V`` (d, t) and boxes ``chosen`` (n_images, t); each
        image's best box under every column of ``V`` is found, and returned among the rows
        where it differs from ``chosen`` (where that holds -1, none is).
    held : array_like of shape (n_images, h) or None, default None
        Boxes the caller holds already (-1 for none): a pass returns only the rows it lacks.
    scheduler : str, distributed.Client or None, default None
        For Dask input, as [qs.detection.score_bags][] takes it.

    Returns
    -------
    ClassTopBoxes
        The top boxes, the checked best boxes and the lacking rows.

    Raises
    ------
    ValueError
        On bad bags or weights, ``k < 1``, or ``gather``, ``held`` or ``chosen`` not of
        box indices of the images' counts.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.top_boxes import class_top_boxes
    >>> features = np.array([[[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]],
    ...                      [[3.0, 1.0], [0.0, 0.0], [0.0, 0.0]]])
    >>> top = class_top_boxes(features, [2, 1], np.array([[1.0, -1.0], [1.0, 0.0]]), 1)
    >>> top.index[:, :, 0].tolist(), top.image.tolist(), top.box.tolist()
    ([[1, 1], [0, 0]], [0, 1], [1, 0])
    """
    flat = isinstance(features, np.ndarray) and features.ndim == 2
    features, counts = check_flat(features, counts) if flat else check_padded(features, counts)
    d, n = features.shape[-1], counts.size
    V, chosen = (np.zeros((d, 0)), np.zeros((n, 0), np.int64)) if check is None else check
    W = np.concatenate([_check_weights(W, d, "W"), _check_weights(V, d, "check weights")], axis=1)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}.")
    gather = np.full((n, 0), -1, np.int64) if gather is None else np.asarray(gather)
    held = np.full((n, 0), -1, np.int64) if held is None else np.asarray(held)
    chosen = np.asarray(chosen)
    for name, boxes, cols in (
        ("gather", gather, None),
        ("held", held, None),
        ("chosen", chosen, V.shape[1]),
    ):
        if (
            boxes.ndim != 2
            or boxes.shape[0] != n
            or not np.issubdtype(boxes.dtype, np.integer)
            or (cols is not None and boxes.shape[1] != cols)
            or (boxes >= counts[:, None]).any()
            or (boxes < -1).any()
        ):
            raise ValueError(
                f"{name} must be an integer array (n_images, {cols or 'g'}) of box "
                f"indices below each image's box count, or -1; got shape "
                f"{boxes.shape}."
            )
    c = W.shape[1] - V.shape[1]
    options = {
        "k": int(k),
        "dtype": features.dtype,
        "c": c,
        "g": gather.shape[1],
        "t": chosen.shape[1],
    }
    per_image = np.concatenate([gather, chosen, held], axis=1).astype(np.int64)
    if flat:
        parts = flat_parts(features, counts, W, per_image, _class_top_block, options, True)
    elif isinstance(features, np.ndarray):
        parts = [_class_top_block(features, counts, W, per_image, 0, **options)]
    else:
        parts = dask_parts(features, counts, W, per_image, _class_top_block, options, scheduler)
    *fields, rows = zip(*parts)
    return ClassTopBoxes(*map(np.concatenate, fields), [r for r in rows if r.shape[0]])


def _check_weights(W: npt.ArrayLike, d: int, name: str) -> np.ndarray:
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != d or not np.isfinite(W).all():
        raise ValueError(f"{name} must be a finite ({d}, columns) array; got shape {W.shape}.")
    return W


def _class_top_block(block, counts, W, per_image, first_image, *, k, dtype, c, g, t):
    """`ClassTopBoxes` fields of the images of one block (``per_image``: its rows of
    gather, chosen and held side by side), ``rows`` one array."""
    n, k_max, _ = block.shape
    per_image = np.asarray(per_image)
    gather, chosen, held = per_image[:, :g], per_image[:, g : g + t], per_image[:, g + t :]
    index = np.full((n, c, k), -1, dtype=np.int64)
    score = np.full((n, c, k), -np.inf)
    best = np.empty(chosen.shape, np.int64)
    image, box, rows = [], [], []
    kept = min(k, k_max)
    for a, b, sub, scores in sub_blocks(block, counts, W, first_image):
        valid = (np.arange(k_max) < counts[a:b, None])[:, :, None]
        top = np.moveaxis(np.where(valid, scores[:, :, :c], -np.inf), 1, 2)  # (m, c, K)
        order = np.argsort(-top, axis=2, kind="stable")[:, :, :kept]  # ties: first box first
        taken = (np.arange(kept) < counts[a:b, None])[:, None, :]
        index[a:b, :, :kept] = np.where(taken, order, -1)
        score[a:b, :, :kept] = np.take_along_axis(top, order, axis=2)
        best[a:b] = padded_argmax(scores[:, :, c:], counts[a:b])[0]
        # the distinct boxes named here and not held, (image, box) in order: one row each
        named = [np.stack([np.nonzero(taken.repeat(c, 1))[0], order[taken.repeat(c, 1)]], 1)]
        lacked = (best[a:b] != chosen[a:b]) & (chosen[a:b] >= 0)
        for boxes in (gather[a:b], np.where(lacked, best[a:b], -1)):
            img, col = np.nonzero(boxes >= 0)
            named.append(np.stack([img, boxes[img, col]], axis=1))
        pairs = np.unique(np.concatenate(named), axis=0)
        if held.shape[1]:
            pairs = pairs[~(held[a:b][pairs[:, 0]] == pairs[:, 1:]).any(axis=1)]
        image.append(first_image + a + pairs[:, 0])
        box.append(pairs[:, 1])
        rows.append(sub[pairs[:, 0], pairs[:, 1]].astype(dtype))
    return (
        index,
        score,
        best,
        np.concatenate(image),
        np.concatenate(box),
        np.concatenate(rows) if len(rows) > 1 else rows[0],
    )
