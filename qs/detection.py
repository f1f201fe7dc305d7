"""Scoring bags of boxes for weakly supervised detection: each image's best box per class, and
its detections after non-maximum suppression, in memory or as a Dask computation.

Bags come padded: ``features`` (n_images, K_max, d), float16/32/64, with ``counts``
(n_images,) valid boxes per image; rows beyond an image's count are padding and never win.
``features`` may be a NumPy array (scored in memory, converted to float64 once), a Dask array,
or a chunked on-disk array such as a zarr array (scored as a Dask computation over blocks of
images, each block upcast to float64 on its own, so that memory stays at a few blocks whatever
the store's size; keep a large float16 array lazy this way). Flat bags, a NumPy matrix
(n_boxes, d) of every image's boxes in turn with the same ``counts``, are padded a few images
at a time and scored by the same code.

One pass scores every box against all classes' weights ``W`` (d, n_classes) at once. Every
image's scores come from one matrix product of its own ``(K_max, d)`` rows (NumPy's batched
``matmul``), so they do not depend on how the images are grouped into blocks: in memory, on
the threaded scheduler or on a ``dask.distributed`` cluster, the result is the same to the bit.

The argmax rule lives in `bag_argmax` and `padded_argmax` only: the best box is
the first among equal scores, padding excluded. Each image's best few boxes (the working sets
of latent training) come from [qs.top_boxes][], by the same blocks and products: it scores
its blocks with `flat_parts`, `dask_parts` and `sub_blocks`, as `score_bags` does.
"""

import contextlib
import numbers
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from qs.metrics import nms

__all__ = [
    "BoxScores",
    "Detections",
    "bag_argmax",
    "check_flat",
    "check_padded",
    "dask_parts",
    "dask_scheduler",
    "flat_parts",
    "padded_argmax",
    "score_bags",
    "sub_blocks",
]

#: bytes of float64 features a block upcasts at a time: bounds memory per worker
SUB_BLOCK_BYTES = 64 << 20
#: schedulers of a local Dask computation, by the name ``dask.compute`` takes
LOCAL_SCHEDULERS = ("threads", "sync", "synchronous", "processes")


class Detections(NamedTuple):
    """Detections of every image and class, one entry each.

    Per image and class, the survivors of non-maximum suppression among its best-scoring
    boxes, best first; images in order.

    Attributes
    ----------
    image : ndarray of shape (n_detections,)
        Index of the image (int64).
    box : ndarray of shape (n_detections,)
        Index of the box within its image (int64).
    cls : ndarray of shape (n_detections,)
        Class: the column of ``W`` (int64).
    score : ndarray of shape (n_detections,)
        The box's score for the class.

    Examples
    --------
    >>> features = np.array([[[1.0], [3.0]], [[2.0], [0.0]]])  # 2 images of 2 boxes
    >>> boxes = np.array([[[1, 1, 10, 10], [50, 50, 60, 60]]] * 2, dtype=float)
    >>> found = score_bags(features, [2, 1], np.ones((1, 1)), top=2, boxes=boxes).detections
    >>> found.image.tolist(), found.box.tolist(), found.score.tolist()
    ([0, 0, 1], [1, 0, 0], [3.0, 1.0, 2.0])
    """

    image: np.ndarray
    box: np.ndarray
    cls: np.ndarray
    score: np.ndarray


@dataclass(frozen=True)
class BoxScores:
    """Outcome of `score_bags`.

    Attributes
    ----------
    best : ndarray of shape (n_images, n_classes)
        Index of each image's best box per class (int64).
    score : ndarray of shape (n_images, n_classes)
        Its score (an image's score for the class).
    rows : ndarray of shape (n_images, n_classes, d) or None
        The best boxes' features (float64), when asked for.
    detections : Detections or None
        The detections, when asked for (``top``).

    Examples
    --------
    >>> features = np.array([[[1.0], [3.0]], [[2.0], [0.0]]])  # 2 images of 2 boxes
    >>> found = score_bags(features, [2, 1], np.array([[1.0, -1.0]]))
    >>> found.best.tolist(), found.score.tolist()
    ([[1, 0], [0, 0]], [[3.0, -1.0], [2.0, -2.0]])
    """

    best: np.ndarray
    score: np.ndarray
    rows: np.ndarray | None = None
    detections: Detections | None = None


def bag_argmax(box_scores: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Row of the best-scoring box of every bag of a flat layout.

    Parameters
    ----------
    box_scores : ndarray of shape (n_boxes,)
        The score of every box, bag after bag.
    offsets : ndarray of shape (n_images + 1,)
        Bounds of the bags in ``box_scores``.

    Returns
    -------
    ndarray of shape (n_images,)
        The row (in ``box_scores``) of each bag's best box: the first one among equal
        scores.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.detection import bag_argmax
    >>> bag_argmax(np.array([0.5, 2.0, 2.0, 1.0, 3.0]), np.array([0, 3, 5])).tolist()
    [1, 4]
    """
    starts, sizes = offsets[:-1], np.diff(offsets)
    padded = np.full((sizes.size, int(sizes.max())), -np.inf)
    padded[
        np.repeat(np.arange(sizes.size), sizes),
        np.arange(box_scores.size) - np.repeat(starts, sizes),
    ] = box_scores
    best, _ = padded_argmax(padded[:, :, None], sizes)
    return starts + best[:, 0]


def padded_argmax(scores: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The best valid box of each image and class of padded scores.

    Parameters
    ----------
    scores : ndarray of shape (n, K, c)
        Scores of every box of each image, per class.
    counts : ndarray of shape (n,)
        Valid boxes per image: rows at or beyond ``counts`` are never chosen.

    Returns
    -------
    index : ndarray of shape (n, c)
        The best box (the first maximum).
    score : ndarray of shape (n, c)
        Its score.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.detection import padded_argmax
    >>> index, score = padded_argmax(np.array([[[1.0], [5.0]], [[2.0], [9.0]]]),
    ...                              np.array([2, 1]))
    >>> index.tolist(), score.tolist()
    ([[1], [0]], [[5.0], [2.0]])
    """
    scores = np.where((np.arange(scores.shape[1]) < counts[:, None])[:, :, None], scores, -np.inf)
    best = scores.argmax(axis=1)
    return best, np.take_along_axis(scores, best[:, None, :], axis=1)[:, 0]


def check_padded(features: Any, counts: npt.ArrayLike) -> tuple[Any, np.ndarray]:
    """Validated padded bags.

    Parameters
    ----------
    features : ndarray, dask array or zarr array of shape (n_images, K_max, d)
        Box features, floating point.
    counts : array_like of shape (n_images,)
        Valid boxes per image, integers in [1, K_max].

    Returns
    -------
    features : ndarray or dask array
        A float64 NumPy array, or a Dask array chunked by images only (a zarr or other
        chunked array becomes a Dask array over its chunks).
    counts : ndarray of shape (n_images,)
        The counts as int64.

    Raises
    ------
    ValueError
        If ``features`` is not a 3-D floating-point array or ``counts`` does not give
        1 to K_max boxes for each image.

    Examples
    --------
    >>> features, counts = check_padded(np.zeros((2, 3, 4), np.float32), [3, 1])
    >>> features.dtype, counts
    (dtype('float64'), array([3, 1]))
    >>> check_padded(np.zeros((2, 3, 4)), [3, 0])
    Traceback (most recent call last):
        ...
    ValueError: counts must lie in [1, 3] (every image holds at least one box, at most the ...
    """
    if getattr(features, "ndim", None) != 3:
        raise ValueError(
            "padded box features must be a 3-D array (images, boxes, features); "
            f"got shape {np.shape(features)}."
        )
    if not np.issubdtype(features.dtype, np.floating):
        raise ValueError(f"box features must be floating point; got dtype {features.dtype}.")
    counts = np.asarray(counts)
    n_images, k_max, _ = features.shape
    if counts.shape != (n_images,) or not np.issubdtype(counts.dtype, np.integer):
        raise ValueError(
            f"counts must be an integer array of one box count per image "
            f"({n_images}); got shape {counts.shape} and dtype {counts.dtype}."
        )
    if n_images == 0 or counts.min() < 1 or counts.max() > k_max:
        raise ValueError(
            f"counts must lie in [1, {k_max}] (every image holds at least one "
            "box, at most the padded box count)."
        )
    if isinstance(features, np.ndarray):
        features = np.ascontiguousarray(features, dtype=np.float64)
    else:
        features = _as_dask(features)
    return features, counts.astype(np.int64)


def _as_dask(array: Any) -> Any:
    import dask.array as da

    if not isinstance(array, da.Array):
        chunks = getattr(array, "chunks", None)
        array = da.from_array(array, chunks=chunks if chunks else "auto")
    if array.numblocks[1:] != (1,) * (array.ndim - 1):  # whole boxes and features per block
        array = array.rechunk(dict.fromkeys(range(1, array.ndim), -1))
    return array


def score_bags(
    features: Any,
    counts: npt.ArrayLike,
    W: npt.ArrayLike,
    *,
    top: int | None = None,
    boxes: Any = None,
    nms_threshold: float = 0.3,
    rows: bool = False,
    scheduler: Any = None,
) -> BoxScores:
    """Best box of every image for every class, in one pass over the boxes.

    Parameters
    ----------
    features : ndarray, dask array or zarr array
        Padded, of shape (n_images, K_max, d), float16/32/64, NumPy, Dask or zarr; or
        flat, a NumPy matrix of shape (n_boxes, d) of the images' boxes in turn.
    counts : array_like of shape (n_images,)
        Valid boxes per image (flat: boxes per image, summing to n_boxes; a box is then
        named by its index within its image all the same).
    W : array_like of shape (d, n_classes)
        Weights, one column per class.
    top : int or None, default None
        The number of best boxes per image and class among which non-maximum suppression
        keeps detections (exactly the first survivors of suppression over all the image's
        boxes); None makes no detections.
    boxes : array_like or None, default None
        With ``top``: the boxes, x1 y1 x2 y2, of shape (n_images, K_max, 4) (flat:
        (n_boxes, 4)).
    nms_threshold : float, default 0.3
        IoU above which a box is suppressed by a better one.
    rows : bool, default False
        Also return the features of each image's best box per class (``BoxScores.rows``:
        the one box per image a latent SVM trains on).
    scheduler : str, distributed.Client or None, default None
        For Dask input: None or "threads" (the threaded scheduler), "sync", "processes",
        the address of a running ``dask.distributed`` scheduler, or a
        ``distributed.Client``.

    Returns
    -------
    BoxScores
        Each image's best box and score per class, and what was asked for besides.

    Raises
    ------
    ValueError
        On bags, weights, ``top`` or ``boxes`` of the wrong shape, type or values
        (NaN or infinite weights or features), or an unknown or unreachable scheduler.

    Examples
    --------
    >>> import numpy as np
    >>> from qs.detection import score_bags
    >>> features = np.array([[[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]],
    ...                      [[3.0, 1.0], [0.0, 0.0], [0.0, 0.0]]])
    >>> result = score_bags(features, [2, 1], np.array([[1.0], [1.0]]))
    >>> result.best.tolist(), result.score.tolist()
    ([[1], [0]], [[2.0], [4.0]])
    """
    flat = isinstance(features, np.ndarray) and features.ndim == 2
    features, counts = check_flat(features, counts) if flat else check_padded(features, counts)
    d = features.shape[-1]
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != d:
        raise ValueError(
            f"W must have shape ({d}, n_classes): one column of "
            f"weights per class; got shape {W.shape}."
        )
    if not np.isfinite(W).all():
        raise ValueError("W holds NaN or infinite values.")
    W = np.ascontiguousarray(W)
    if top is not None:
        if isinstance(top, bool) or not isinstance(top, numbers.Integral) or top < 1:
            raise ValueError(f"top must be a positive integer or None; got {top!r}.")
        shape = features.shape[:-1] + (4,)
        if boxes is None or getattr(boxes, "shape", None) != shape:
            raise ValueError(
                f"detections need boxes of shape {shape}; got "
                f"{None if boxes is None else getattr(boxes, 'shape', None)}."
            )
    options = {"top": top, "nms_threshold": float(nms_threshold), "rows": rows}
    if flat:
        parts = flat_parts(
            features, counts, W, np.asarray(boxes) if top else None, _score_block, options
        )
    elif isinstance(features, np.ndarray):
        parts = [
            _score_block(features, counts, W, np.asarray(boxes) if top else None, 0, **options)
        ]
    else:
        parts = dask_parts(
            features, counts, W, boxes if top else None, _score_block, options, scheduler
        )
    best, score, gathered, found = zip(*parts)
    return BoxScores(
        np.concatenate(best),
        np.concatenate(score),
        np.concatenate(gathered) if rows else None,
        Detections(*map(np.concatenate, zip(*found))) if top else None,
    )


def check_flat(X: np.ndarray, counts: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validated flat bags.

    Parameters
    ----------
    X : ndarray of shape (n_boxes, d)
        Box features, floating point, image after image.
    counts : array_like of shape (n_images,)
        Boxes per image: at least one each, summing to n_boxes.

    Returns
    -------
    X : ndarray of shape (n_boxes, d)
        The features, as given.
    counts : ndarray of shape (n_images,)
        The counts as int64.

    Raises
    ------
    ValueError
        If ``X`` is not floating point or ``counts`` does not fit it.

    Examples
    --------
    >>> X, counts = check_flat(np.zeros((5, 2)), [2, 3])
    >>> counts
    array([2, 3])
    >>> check_flat(np.zeros((5, 2)), [2, 2])
    Traceback (most recent call last):
        ...
    ValueError: counts must give at least one box per image and sum to the 5 rows of the ...
    """
    if not np.issubdtype(X.dtype, np.floating):
        raise ValueError(f"box features must be floating point; got dtype {X.dtype}.")
    counts = np.asarray(counts)
    if (
        counts.ndim != 1
        or counts.size == 0
        or not np.issubdtype(counts.dtype, np.integer)
        or counts.min() < 1
        or counts.sum() != X.shape[0]
    ):
        raise ValueError(
            f"counts must give at least one box per image and sum to the "
            f"{X.shape[0]} rows of the flat box features; got shape "
            f"{counts.shape}, dtype {counts.dtype}."
        )
    return X, counts.astype(np.int64)


def flat_parts(
    X: np.ndarray,
    counts: np.ndarray,
    W: np.ndarray,
    boxes: Any,
    fn: Callable[..., Any],
    options: dict[str, Any],
    per_image: bool = False,
) -> Sequence[Any]:
    """A block scorer's results over flat bags, a few images at a time.

    Parameters
    ----------
    X : ndarray of shape (n_boxes, d)
        Flat box features (checked by `check_flat`).
    counts : ndarray of shape (n_images,)
        Boxes per image.
    W : ndarray of shape (d, c)
        Weights.
    boxes : ndarray or None
        One row per box, or per image when ``per_image``; None for none.
    fn : callable
        The block scorer, ``fn(block, counts, W, boxes, first_image, **options)``, as
        `score_bags` and [qs.top_boxes.class_top_boxes][] use.
    options : dict
        Keyword arguments of ``fn``.
    per_image : bool, default False
        Whether ``boxes`` has one row per image.

    Returns
    -------
    list
        ``fn``'s result for each group of images, each group padded to its largest image.

    Examples
    --------
    >>> def best(block, counts, W, boxes, first_image):
    ...     return (block @ W).max(axis=1)
    >>> X = np.array([[1.0], [3.0], [2.0]])  # image 0: boxes 0 and 1; image 1: box 2
    >>> [part.tolist() for part in flat_parts(X, np.array([2, 1]), np.ones((1, 1)), None,
    ...                                        best, {})]
    [[[3.0], [2.0]]]
    """
    offsets = np.concatenate([[0], np.cumsum(counts)])
    step = max(1, SUB_BLOCK_BYTES // (int(counts.max()) * X.shape[1] * 8))
    parts = []
    for a in range(0, counts.size, step):
        b = min(counts.size, a + step)
        valid = np.arange(counts[a:b].max()) < counts[a:b, None]
        block = np.zeros(valid.shape + (X.shape[1],))
        block[valid] = X[offsets[a] : offsets[b]]
        padded_boxes = boxes[a:b] if per_image else None
        if boxes is not None and not per_image:
            padded_boxes = np.zeros(valid.shape + (4,))
            padded_boxes[valid] = boxes[offsets[a] : offsets[b]]
        parts.append(fn(block, counts[a:b], W, padded_boxes, a, **options))
    return parts


def dask_parts(
    features: Any,
    counts: np.ndarray,
    W: np.ndarray,
    boxes: Any,
    fn: Callable[..., Any],
    options: dict[str, Any],
    scheduler: Any,
) -> tuple[Any, ...]:
    """A block scorer's results over every block of images of a Dask array.

    Parameters
    ----------
    features : dask array of shape (n_images, K_max, d)
        Padded box features, chunked by images only.
    counts : ndarray of shape (n_images,)
        Valid boxes per image.
    W : ndarray of shape (d, c)
        Weights (one key that every task reads).
    boxes : array_like or None
        One row per image (rechunked as ``features``), or None.
    fn : callable
        The block scorer, as `flat_parts` calls it.
    options : dict
        Keyword arguments of ``fn``.
    scheduler : str, distributed.Client or None
        As `score_bags` takes it.

    Returns
    -------
    tuple
        ``fn``'s result for each block, one task per block.

    Examples
    --------
    >>> import dask.array as da
    >>> def best(block, counts, W, boxes, first_image):
    ...     return (block @ W).max(axis=1)
    >>> features = da.from_array(np.array([[[1.0], [3.0]], [[2.0], [0.0]]]), chunks=(1, 2, 1))
    >>> parts = dask_parts(features, np.array([2, 1]), np.ones((1, 1)), None, best, {}, None)
    >>> [part.tolist() for part in parts]
    [[[3.0]], [[2.0]]]
    """
    import dask

    bounds = np.concatenate([[0], np.cumsum(features.chunks[0])])
    blocks = features.to_delayed().ravel()
    if boxes is not None:
        boxes = _as_dask(boxes).rechunk({0: features.chunks[0]}).to_delayed().ravel()
    weights = dask.delayed(W)  # one key that every task reads, not a copy in each
    score = dask.delayed(fn, pure=True)
    tasks = [
        score(block, counts[a:b], weights, None if boxes is None else boxes[i], a, **options)
        for i, (block, a, b) in enumerate(zip(blocks, bounds[:-1], bounds[1:]))
    ]
    with dask_scheduler(scheduler) as get:
        return dask.compute(*tasks, scheduler=get)


@contextlib.contextmanager
def dask_scheduler(scheduler: Any) -> Iterator[Any]:
    """What ``dask.compute(scheduler=...)`` takes for ``scheduler``, as a context.

    Parameters
    ----------
    scheduler : str, distributed.Client or None
        As `score_bags` takes it.

    Yields
    ------
    str or distributed.Client
        The local scheduler's name ("threads" for None), or a client: one connected for
        the duration of the block when given an address.

    Raises
    ------
    ValueError
        On an unknown scheduler, an address without ``distributed`` installed, or one
        that cannot be reached.

    Examples
    --------
    >>> from qs.detection import dask_scheduler
    >>> with dask_scheduler(None) as get:
    ...     print(get)
    threads
    """
    if scheduler is None:
        yield "threads"
    elif isinstance(scheduler, str) and scheduler in LOCAL_SCHEDULERS:
        yield scheduler
    elif isinstance(scheduler, str):
        try:
            from distributed import Client
        except ImportError:
            raise ValueError(
                f"scheduler {scheduler!r} names a dask.distributed cluster, but "
                "distributed is not installed (pip install 'qsrank[dask]')."
            ) from None
        try:
            client = Client(scheduler, set_as_default=False, timeout=10)
        except OSError as err:
            raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: {err}") from None
        with client:
            yield client
    elif hasattr(scheduler, "get") and hasattr(scheduler, "scheduler_info"):  # a Client
        yield scheduler
    else:
        raise ValueError(
            f"scheduler must be None, one of {LOCAL_SCHEDULERS}, a dask.distributed "
            f"scheduler address or Client; got {scheduler!r}."
        )


def sub_blocks(
    block: np.ndarray, counts: np.ndarray, W: np.ndarray, first_image: int
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """The images of a block a few at a time, with their scores.

    Parameters
    ----------
    block : ndarray of shape (n, K_max, d)
        Padded box features of a block of images.
    counts : ndarray of shape (n,)
        Valid boxes per image.
    W : ndarray of shape (d, c)
        Weights.
    first_image : int
        Index of the block's first image (for error messages).

    Yields
    ------
    tuple
        ``(a, b, features, scores)`` of the images ``a:b``: their features upcast to
        float64 (one buffer for the block: its pages are touched once) and their scores
        (images, K_max, c), one matrix product per image.

    Raises
    ------
    ValueError
        If a valid box's score is NaN or infinite.

    Examples
    --------
    >>> block = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    >>> for a, b, features, scores in sub_blocks(block, np.array([3, 2]), np.ones((2, 1)), 0):
    ...     print(a, b, features.dtype, scores[:, :, 0].tolist())
    0 2 float64 [[1.0, 5.0, 9.0], [13.0, 17.0, 21.0]]
    """
    n, k_max, d = block.shape
    step = max(1, SUB_BLOCK_BYTES // (k_max * d * 8))
    upcast = block.dtype != np.float64 or not block.flags.c_contiguous
    buffer: Any = np.empty((min(step, n), k_max, d)) if upcast else None
    for a in range(0, n, step):
        b = min(n, a + step)
        if upcast:
            sub = buffer[: b - a]
            np.copyto(sub, block[a:b])
        else:
            sub = block[a:b]
        scores = np.matmul(sub, W)
        valid = np.arange(k_max) < counts[a:b, None]
        if not np.isfinite(scores[valid]).all():
            raise ValueError(
                f"box features hold NaN or infinite values (images "
                f"{first_image + a} to {first_image + b - 1})."
            )
        yield a, b, sub, scores


def _score_block(block, counts, W, boxes, first_image, *, top, nms_threshold, rows):
    """Best boxes (and detections) of the images of one block, ``first_image`` the first's
    index: ``(best, score, rows or None, detections as 4 arrays or None)``."""
    n, _, d = block.shape
    best = np.empty((n, W.shape[1]), dtype=np.int64)
    score = np.empty((n, W.shape[1]))
    gathered = np.empty((n, W.shape[1], d)) if rows else None
    found = []
    for a, b, sub, scores in sub_blocks(block, counts, W, first_image):
        best[a:b], score[a:b] = padded_argmax(scores, counts[a:b])
        if rows:
            gathered[a:b] = np.take_along_axis(sub, best[a:b, :, None], axis=1)
        if top:
            found += _detect(
                scores,
                counts[a:b],
                np.asarray(boxes[a:b], dtype=np.float64),
                first_image + a,
                top,
                nms_threshold,
            )
    if top:
        found = (
            [np.concatenate(x) for x in zip(*found)]
            if found
            else [np.zeros(0, np.int64)] * 3 + [np.zeros(0)]
        )
    return best, score, gathered, found or None


def _detect(scores, counts, boxes, first_image, top, threshold):
    """Per image and class: suppression among the ``top`` best boxes (descending score, equal
    scores in box order, as `qs.metrics.nms` takes them)."""
    found = []
    for i in range(scores.shape[0]):
        valid = scores[i, : counts[i]]
        order = np.argsort(-valid, axis=0, kind="stable")[:top]  # (top, classes)
        for c in range(scores.shape[2]):
            picked = order[:, c]
            kept = picked[nms(boxes[i, picked], valid[picked, c], threshold)]
            found.append(
                (
                    np.full(kept.size, first_image + i, dtype=np.int64),
                    kept.astype(np.int64),
                    np.full(kept.size, c, dtype=np.int64),
                    valid[kept, c],
                )
            )
    return found
