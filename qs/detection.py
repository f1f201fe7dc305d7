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

The argmax rule lives in :func:`bag_argmax` and :func:`padded_argmax` only: the best box is
the first among equal scores, padding excluded. Each image's best few boxes (the working sets
of latent training) come from :mod:`qs.top_boxes`, by the same blocks and products: it scores
its blocks with :func:`flat_parts`, :func:`dask_parts` and :func:`sub_blocks`, as
:func:`score_bags` does.
"""

import contextlib
import numbers
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from qs.metrics import nms

__all__ = ["BoxScores", "Detections", "bag_argmax", "check_flat", "check_padded", "dask_parts",
           "dask_scheduler", "flat_parts", "padded_argmax", "score_bags", "sub_blocks"]

#: bytes of float64 features a block upcasts at a time: bounds memory per worker
SUB_BLOCK_BYTES = 64 << 20
#: schedulers of a local Dask computation, by the name ``dask.compute`` takes
LOCAL_SCHEDULERS = ("threads", "sync", "synchronous", "processes")


class Detections(NamedTuple):
    """Detections of every image and class, one entry each: ``image`` and ``box`` (indices),
    ``cls`` (class column of ``W``), ``score``. Per image and class, the survivors of
    non-maximum suppression among its best-scoring boxes, best first; images in order."""

    image: np.ndarray
    box: np.ndarray
    cls: np.ndarray
    score: np.ndarray


@dataclass(frozen=True)
class BoxScores:
    """Outcome of :func:`score_bags`.

    best : int64 (n_images, n_classes), index of each image's best box per class.
    score : float64 (n_images, n_classes), its score (an image's score for the class).
    rows : float64 (n_images, n_classes, d), the best boxes' features, or None.
    detections : :class:`Detections`, or None.
    """

    best: np.ndarray
    score: np.ndarray
    rows: np.ndarray | None = None
    detections: Detections | None = None


def bag_argmax(box_scores, offsets):
    """Row of the best-scoring box of every bag of a flat layout (``offsets`` (n_images + 1,)
    bounds the bags of ``box_scores`` (n_boxes,)); the first one among equal scores."""
    starts, sizes = offsets[:-1], np.diff(offsets)
    padded = np.full((sizes.size, int(sizes.max())), -np.inf)
    padded[np.repeat(np.arange(sizes.size), sizes), np.arange(box_scores.size)
           - np.repeat(starts, sizes)] = box_scores
    best, _ = padded_argmax(padded[:, :, None], sizes)
    return starts + best[:, 0]


def padded_argmax(scores, counts):
    """``(index, score)`` of the best valid box of each image and class of ``scores``
    (n, K, c): the first maximum, rows at or beyond ``counts`` never chosen."""
    scores = np.where((np.arange(scores.shape[1]) < counts[:, None])[:, :, None], scores,
                      -np.inf)
    best = scores.argmax(axis=1)
    return best, np.take_along_axis(scores, best[:, None, :], axis=1)[:, 0]


def check_padded(features, counts):
    """Validated padded bags: ``features`` as a float64 NumPy array or a Dask array chunked by
    images only (a zarr or other chunked array becomes a Dask array over its chunks), and
    ``counts`` as int64 with ``1 <= counts <= K_max``."""
    if getattr(features, "ndim", None) != 3:
        raise ValueError("padded box features must be a 3-D array (images, boxes, features); "
                         f"got shape {np.shape(features)}.")
    if not np.issubdtype(features.dtype, np.floating):
        raise ValueError(f"box features must be floating point; got dtype {features.dtype}.")
    counts = np.asarray(counts)
    n_images, k_max, _ = features.shape
    if counts.shape != (n_images,) or not np.issubdtype(counts.dtype, np.integer):
        raise ValueError(f"counts must be an integer array of one box count per image "
                         f"({n_images}); got shape {counts.shape} and dtype {counts.dtype}.")
    if n_images == 0 or counts.min() < 1 or counts.max() > k_max:
        raise ValueError(f"counts must lie in [1, {k_max}] (every image holds at least one "
                         "box, at most the padded box count).")
    if isinstance(features, np.ndarray):
        features = np.ascontiguousarray(features, dtype=np.float64)
    else:
        features = _as_dask(features)
    return features, counts.astype(np.int64)


def _as_dask(array):
    import dask.array as da

    if not isinstance(array, da.Array):
        chunks = getattr(array, "chunks", None)
        array = da.from_array(array, chunks=chunks if chunks else "auto")
    if array.numblocks[1:] != (1,) * (array.ndim - 1):  # whole boxes and features per block
        array = array.rechunk({axis: -1 for axis in range(1, array.ndim)})
    return array


def score_bags(features, counts, W, *, top=None, boxes=None, nms_threshold=0.3, rows=False,
               scheduler=None):
    """Best box of every image for every class, in one pass over the boxes.

    Parameters
    ----------
    features : (n_images, K_max, d) NumPy, Dask or zarr array (float16/32/64), padded; or
        flat, a NumPy (n_boxes, d) matrix of the images' boxes in turn.
    counts : (n_images,) int, valid boxes per image (flat: boxes per image, summing to
        n_boxes; a box is then named by its index within its image all the same).
    W : (d, n_classes) weights, one column per class.
    top : None, or the number of best boxes per image and class among which non-maximum
        suppression keeps detections (exactly the first survivors of suppression over all the
        image's boxes); needs ``boxes`` (n_images, K_max, 4), x1 y1 x2 y2 (flat: (n_boxes, 4)).
    nms_threshold : IoU above which a box is suppressed by a better one.
    rows : also return the features of each image's best box per class (``BoxScores.rows``,
        n_images x n_classes x d float64: the one box per image a latent SVM trains on).
    scheduler : for Dask input: None or "threads" (the threaded scheduler), "sync",
        "processes", the address of a running ``dask.distributed`` scheduler, or a
        ``distributed.Client``.

    Returns a :class:`BoxScores`.
    """
    flat = isinstance(features, np.ndarray) and features.ndim == 2
    features, counts = check_flat(features, counts) if flat else check_padded(features, counts)
    d = features.shape[-1]
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != d:
        raise ValueError(f"W must have shape ({d}, n_classes): one column of "
                         f"weights per class; got shape {W.shape}.")
    if not np.isfinite(W).all():
        raise ValueError("W holds NaN or infinite values.")
    W = np.ascontiguousarray(W)
    if top is not None:
        if isinstance(top, bool) or not isinstance(top, numbers.Integral) or top < 1:
            raise ValueError(f"top must be a positive integer or None; got {top!r}.")
        shape = features.shape[:-1] + (4,)
        if boxes is None or getattr(boxes, "shape", None) != shape:
            raise ValueError(f"detections need boxes of shape {shape}; got "
                             f"{None if boxes is None else getattr(boxes, 'shape', None)}.")
    options = {"top": top, "nms_threshold": float(nms_threshold), "rows": rows}
    if flat:
        parts = flat_parts(features, counts, W, np.asarray(boxes) if top else None,
                            _score_block, options)
    elif isinstance(features, np.ndarray):
        parts = [_score_block(features, counts, W, np.asarray(boxes) if top else None, 0,
                              **options)]
    else:
        parts = dask_parts(features, counts, W, boxes if top else None, _score_block, options,
                           scheduler)
    best, score, gathered, found = zip(*parts)
    return BoxScores(np.concatenate(best), np.concatenate(score),
                     np.concatenate(gathered) if rows else None,
                     Detections(*map(np.concatenate, zip(*found))) if top else None)


def check_flat(X, counts):
    """Validated flat bags: ``X`` (n_boxes, d) floating point, ``counts`` (n_images,) int64
    of at least one box each, summing to n_boxes."""
    if not np.issubdtype(X.dtype, np.floating):
        raise ValueError(f"box features must be floating point; got dtype {X.dtype}.")
    counts = np.asarray(counts)
    if counts.ndim != 1 or counts.size == 0 or not np.issubdtype(counts.dtype, np.integer) \
            or counts.min() < 1 or counts.sum() != X.shape[0]:
        raise ValueError(f"counts must give at least one box per image and sum to the "
                         f"{X.shape[0]} rows of the flat box features; got shape "
                         f"{counts.shape}, dtype {counts.dtype}.")
    return X, counts.astype(np.int64)


def flat_parts(X, counts, W, boxes, fn, options, per_image=False):
    """The list of ``fn(block, counts, W, boxes, first_image, **options)`` (a block scorer, as
    :func:`score_bags` and :func:`qs.top_boxes.class_top_boxes` use) over flat bags a few
    images at a time, each group padded to its largest image; ``boxes`` one row per box, or
    per image when ``per_image``."""
    offsets = np.concatenate([[0], np.cumsum(counts)])
    step = max(1, SUB_BLOCK_BYTES // (int(counts.max()) * X.shape[1] * 8))
    parts = []
    for a in range(0, counts.size, step):
        b = min(counts.size, a + step)
        valid = np.arange(counts[a:b].max()) < counts[a:b, None]
        block = np.zeros(valid.shape + (X.shape[1],))
        block[valid] = X[offsets[a]:offsets[b]]
        padded_boxes = boxes[a:b] if per_image else None
        if boxes is not None and not per_image:
            padded_boxes = np.zeros(valid.shape + (4,))
            padded_boxes[valid] = boxes[offsets[a]:offsets[b]]
        parts.append(fn(block, counts[a:b], W, padded_boxes, a, **options))
    return parts


def dask_parts(features, counts, W, boxes, fn, options, scheduler):
    """The tuple of ``fn(block, counts, W, boxes, first_image, **options)`` (a block scorer,
    as :func:`flat_parts` calls it) over every block of images of a Dask array, one task per
    block, computed on ``scheduler`` (as :func:`score_bags` takes it)."""
    import dask

    bounds = np.concatenate([[0], np.cumsum(features.chunks[0])])
    blocks = features.to_delayed().ravel()
    if boxes is not None:
        boxes = _as_dask(boxes).rechunk({0: features.chunks[0]}).to_delayed().ravel()
    weights = dask.delayed(W)  # one key that every task reads, not a copy in each
    score = dask.delayed(fn, pure=True)
    tasks = [score(block, counts[a:b], weights, None if boxes is None else boxes[i], a,
                   **options)
             for i, (block, a, b) in enumerate(zip(blocks, bounds[:-1], bounds[1:]))]
    with dask_scheduler(scheduler) as get:
        return dask.compute(*tasks, scheduler=get)


@contextlib.contextmanager
def dask_scheduler(scheduler):
    """What ``dask.compute(scheduler=...)`` takes for ``scheduler`` (see :func:`score_bags`):
    a client connected for the duration of the block when given an address."""
    if scheduler is None:
        yield "threads"
    elif isinstance(scheduler, str) and scheduler in LOCAL_SCHEDULERS:
        yield scheduler
    elif isinstance(scheduler, str):
        try:
            from distributed import Client
        except ImportError:
            raise ValueError(f"scheduler {scheduler!r} names a dask.distributed cluster, but "
                             "distributed is not installed (pip install 'qsrank[dask]').") \
                from None
        try:
            client = Client(scheduler, set_as_default=False, timeout=10)
        except OSError as err:
            raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: {err}") from None
        with client:
            yield client
    elif hasattr(scheduler, "get") and hasattr(scheduler, "scheduler_info"):  # a Client
        yield scheduler
    else:
        raise ValueError(f"scheduler must be None, one of {LOCAL_SCHEDULERS}, a dask.distributed "
                         f"scheduler address or Client; got {scheduler!r}.")


def sub_blocks(block, counts, W, first_image):
    """``(a, b, features, scores)`` of the images ``a:b`` of a block, a few at a time: their
    features upcast to float64 (one buffer for the block: its pages are touched once) and
    their scores (images, K_max, classes), one matrix product per image, checked finite."""
    n, k_max, d = block.shape
    step = max(1, SUB_BLOCK_BYTES // (k_max * d * 8))
    upcast = block.dtype != np.float64 or not block.flags.c_contiguous
    buffer = np.empty((min(step, n), k_max, d)) if upcast else None
    for a in range(0, n, step):
        b = min(n, a + step)
        if upcast:
            sub = buffer[:b - a]
            np.copyto(sub, block[a:b])
        else:
            sub = block[a:b]
        scores = np.matmul(sub, W)
        valid = np.arange(k_max) < counts[a:b, None]
        if not np.isfinite(scores[valid]).all():
            raise ValueError(f"box features hold NaN or infinite values (images "
                             f"{first_image + a} to {first_image + b - 1}).")
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
            found += _detect(scores, counts[a:b], np.asarray(boxes[a:b], dtype=np.float64),
                             first_image + a, top, nms_threshold)
    if top:
        found = [np.concatenate(x) for x in zip(*found)] if found else \
            [np.zeros(0, np.int64)] * 3 + [np.zeros(0)]
    return best, score, gathered, found or None


def _detect(scores, counts, boxes, first_image, top, threshold):
    """Per image and class: suppression among the ``top`` best boxes (descending score, equal
    scores in box order, as :func:`qs.metrics.nms` takes them)."""
    found = []
    for i in range(scores.shape[0]):
        valid = scores[i, :counts[i]]
        order = np.argsort(-valid, axis=0, kind="stable")[:top]  # (top, classes)
        for c in range(scores.shape[2]):
            picked = order[:, c]
            kept = picked[nms(boxes[i, picked], valid[picked, c], threshold)]
            found.append((np.full(kept.size, first_image + i, dtype=np.int64),
                          kept.astype(np.int64), np.full(kept.size, c, dtype=np.int64),
                          valid[kept, c]))
    return found
