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

The argmax rule lives in :func:`bag_argmax` and :func:`_best` only: the best box is the first
among equal scores, padding excluded.
"""

import contextlib
import numbers
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from qs.metrics import nms

__all__ = ["BoxScores", "ClassTopBoxes", "Detections", "TopBoxes", "bag_argmax", "check_flat",
           "check_padded", "class_top_boxes", "dask_scheduler", "score_bags", "top_boxes"]

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
    best, _ = _best(padded[:, :, None], sizes)
    return starts + best[:, 0]


def _best(scores, counts):
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
        parts = _flat_parts(features, counts, W, np.asarray(boxes) if top else None,
                            _score_block, options)
    elif isinstance(features, np.ndarray):
        parts = [_score_block(features, counts, W, np.asarray(boxes) if top else None, 0,
                              **options)]
    else:
        parts = _dask_parts(features, counts, W, boxes if top else None, _score_block, options,
                            scheduler)
    best, score, gathered, found = zip(*parts)
    return BoxScores(np.concatenate(best), np.concatenate(score),
                     np.concatenate(gathered) if rows else None,
                     Detections(*map(np.concatenate, zip(*found))) if top else None)


class TopBoxes(NamedTuple):
    """Outcome of :func:`top_boxes`, per image under one weight vector: ``index`` int64 (n, k),
    its ``k`` best boxes (best first, the first among equal scores first; -1 past an image's
    box count), ``rows`` float64 (n, k, d) their features (zeros past the count), ``score``
    (n, k) their scores (-inf past the count), ``next_score`` (n,) the best score of the
    boxes left out (-inf when none is), ``mean`` (n, d) the image's mean box and ``spread``
    (n,) the largest distance of one of its boxes from that mean."""

    index: np.ndarray
    rows: np.ndarray
    score: np.ndarray
    next_score: np.ndarray
    mean: np.ndarray
    spread: np.ndarray


def top_boxes(features, counts, w, k, *, scheduler=None):
    """The ``k`` best boxes of every image under weights ``w`` (d,), in one pass over the
    boxes (bags, ``counts`` and ``scheduler`` as :func:`score_bags` takes them), with what
    bounds the scores of the boxes left out under other weights: a box ``x`` left out scores
    ``x . v <= next_score + mean . (v - w) + spread * |v - w|`` for any ``v`` (as ``x . (v -
    w) = mean . (v - w) + (x - mean) . (v - w)``). Returns a :class:`TopBoxes`; its first
    column is :func:`score_bags`'s best box."""
    flat = isinstance(features, np.ndarray) and features.ndim == 2
    features, counts = check_flat(features, counts) if flat else check_padded(features, counts)
    W = np.ascontiguousarray(np.asarray(w, dtype=np.float64).reshape(-1, 1))
    if W.shape[0] != features.shape[-1] or not np.isfinite(W).all():
        raise ValueError(f"w must hold {features.shape[-1]} finite weights; got shape "
                         f"{np.shape(w)}.")
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}.")
    options = {"k": int(k)}
    if flat:
        parts = _flat_parts(features, counts, W, None, _top_block, options)
    elif isinstance(features, np.ndarray):
        parts = [_top_block(features, counts, W, None, 0, **options)]
    else:
        parts = _dask_parts(features, counts, W, None, _top_block, options, scheduler)
    return TopBoxes(*map(np.concatenate, zip(*parts)))


def _top_block(block, counts, W, boxes, first_image, *, k):
    """:class:`TopBoxes` fields of the images of one block (``boxes`` unused)."""
    n, k_max, d = block.shape
    index, rows = np.full((n, k), -1, dtype=np.int64), np.zeros((n, k, d))
    score, next_score = np.full((n, k), -np.inf), np.full(n, -np.inf)
    mean, spread = np.empty((n, d)), np.empty(n)
    kept = min(k, k_max)
    for a, b, sub, scores in _sub_blocks(block, counts, W, first_image):
        valid = np.arange(k_max) < counts[a:b, None]
        scores = np.where(valid, scores[:, :, 0], -np.inf)
        order = np.argsort(-scores, axis=1, kind="stable")  # ties: the first box first
        taken = np.arange(kept) < counts[a:b, None]
        index[a:b, :kept] = np.where(taken, order[:, :kept], -1)
        score[a:b, :kept] = np.take_along_axis(scores, order[:, :kept], axis=1)
        rows[a:b, :kept] = np.take_along_axis(sub, order[:, :kept, None], axis=1) \
            * taken[:, :, None]
        if k < k_max:
            next_score[a:b] = np.take_along_axis(scores, order[:, k:k + 1], axis=1)[:, 0]
        mean[a:b] = np.einsum("ikd,ik->id", sub, valid) / counts[a:b, None]
        away = sub - mean[a:b, None, :]
        spread[a:b] = np.where(valid, np.sqrt(np.einsum("ikd,ikd->ik", away, away)), 0) \
            .max(axis=1)
    return index, rows, score, next_score, mean, spread


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


def _flat_parts(X, counts, W, boxes, fn, options, per_image=False):
    """``fn`` (a block scorer) over flat bags a few images at a time, each group padded to its
    largest image; ``boxes`` one row per box, or per image when ``per_image``."""
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


def _dask_parts(features, counts, W, boxes, fn, options, scheduler):
    """``fn`` (a block scorer) over every block of images of a Dask array, one task per
    block."""
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


def _sub_blocks(block, counts, W, first_image):
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
    for a, b, sub, scores in _sub_blocks(block, counts, W, first_image):
        best[a:b], score[a:b] = _best(scores, counts[a:b])
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


class ClassTopBoxes(NamedTuple):
    """Outcome of :func:`class_top_boxes`, per image and class (a column of ``W``): ``index``
    int64 (n, c, k), the class's ``k`` best boxes (best first, the first among equal scores
    first; -1 past an image's box count), ``score`` float64 (n, c, k) their scores (-inf past
    the count), ``rows`` (n, c, k, d) their features (zeros past the count); ``gathered`` (n,
    g, d) the features of the boxes ``gather`` named (zeros where it holds -1); per column of
    the checked weights, ``best`` int64 (n, t) each image's best box, and ``missing`` the
    boxes ``(image, box, features)`` that were best under some checked column where the
    given choice was another box, each pair once. Features in the input's type at float32 or
    wider (a float16 box converts exactly)."""

    index: np.ndarray
    score: np.ndarray
    rows: np.ndarray
    gathered: np.ndarray
    best: np.ndarray
    missing: tuple


def class_top_boxes(features, counts, W, k, *, gather=None, check=None, scheduler=None):
    """In one pass over the boxes: the ``k`` best boxes of every image under each class's
    weights ``W`` (d, c); the features of the boxes ``gather`` (n_images, g) names (box
    indices, -1 for none); and with ``check = (V, chosen)``, weights ``V`` (d, t) and boxes
    ``chosen`` (n_images, t), each image's best box under every column of ``V`` and the
    features of those that differ from ``chosen`` (where it holds -1, none). The pass of
    latent training with all classes in lockstep (:func:`qs.ssvm.lockstep.latent_lockstep`). Bags, ``counts`` and
    ``scheduler`` as :func:`score_bags` takes them; the scores are its scores to the bit,
    so column 0 of ``index`` is its best box. Returns a :class:`ClassTopBoxes`."""
    flat = isinstance(features, np.ndarray) and features.ndim == 2
    features, counts = check_flat(features, counts) if flat else check_padded(features, counts)
    d, n = features.shape[-1], counts.size
    V, chosen = (np.zeros((d, 0)), np.zeros((n, 0), np.int64)) if check is None else check
    W = np.concatenate([_check_weights(W, d, "W"), _check_weights(V, d, "check weights")],
                       axis=1)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}.")
    gather = np.full((n, 0), -1, np.int64) if gather is None else np.asarray(gather)
    chosen = np.asarray(chosen)
    for name, boxes, cols in (("gather", gather, None), ("chosen", chosen, V.shape[1])):
        if boxes.ndim != 2 or boxes.shape[0] != n or not np.issubdtype(boxes.dtype, np.integer) \
                or (cols is not None and boxes.shape[1] != cols) \
                or (boxes >= counts[:, None]).any() or (boxes < -1).any():
            raise ValueError(f"{name} must be an integer array (n_images, {cols or 'g'}) of box "
                             f"indices below each image's box count, or -1; got shape "
                             f"{boxes.shape}.")
    c = W.shape[1] - V.shape[1]
    options = {"k": int(k), "dtype": np.result_type(features.dtype, np.float32), "c": c,
               "g": gather.shape[1]}
    per_image = np.concatenate([gather, chosen], axis=1).astype(np.int64)
    if flat:
        parts = _flat_parts(features, counts, W, per_image, _class_top_block, options, True)
    elif isinstance(features, np.ndarray):
        parts = [_class_top_block(features, counts, W, per_image, 0, **options)]
    else:
        parts = _dask_parts(features, counts, W, per_image, _class_top_block, options,
                            scheduler)
    *fields, img, box, rows = map(np.concatenate, zip(*parts))
    return ClassTopBoxes(*fields, (img, box, rows))


def _check_weights(W, d, name):
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != d or not np.isfinite(W).all():
        raise ValueError(f"{name} must be a finite ({d}, columns) array; got shape {W.shape}.")
    return W


def _class_top_block(block, counts, W, per_image, first_image, *, k, dtype, c, g):
    """:class:`ClassTopBoxes` fields of the images of one block (``per_image``: its rows of
    gather and chosen side by side), ``missing`` as three arrays."""
    n, k_max, d = block.shape
    per_image = np.asarray(per_image)
    gather, chosen = per_image[:, :g], per_image[:, g:]
    index = np.full((n, c, k), -1, dtype=np.int64)
    score = np.full((n, c, k), -np.inf)
    rows = np.zeros((n, c, k, d), dtype)
    gathered = np.zeros((n, g, d), dtype)
    best = np.empty(chosen.shape, np.int64)
    missing = [np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, d), dtype)]
    kept = min(k, k_max)
    for a, b, sub, scores in _sub_blocks(block, counts, W, first_image):
        m = b - a
        valid = (np.arange(k_max) < counts[a:b, None])[:, :, None]
        top = np.moveaxis(np.where(valid, scores[:, :, :c], -np.inf), 1, 2)  # (m, c, K)
        order = np.argsort(-top, axis=2, kind="stable")[:, :, :kept]  # ties: first box first
        taken = (np.arange(kept) < counts[a:b, None])[:, None, :]
        index[a:b, :, :kept] = np.where(taken, order, -1)
        score[a:b, :, :kept] = np.take_along_axis(top, order, axis=2)
        picked = np.take_along_axis(sub, order.reshape(m, c * kept, 1), axis=1)
        rows[a:b, :, :kept] = picked.reshape(m, c, kept, d) * taken[:, :, :, None]
        want = gather[a:b]
        got = np.take_along_axis(sub, np.maximum(want, 0)[:, :, None], axis=1)
        gathered[a:b] = got * (want >= 0)[:, :, None]
        best[a:b] = _best(scores[:, :, c:], counts[a:b])[0]
        img, col = np.nonzero((best[a:b] != chosen[a:b]) & (chosen[a:b] >= 0))
        pairs = np.unique(np.stack([img, best[a:b][img, col]], axis=1), axis=0)
        missing = [np.concatenate([missing[0], first_image + a + pairs[:, 0]]),
                   np.concatenate([missing[1], pairs[:, 1]]),
                   np.concatenate([missing[2], sub[pairs[:, 0], pairs[:, 1]].astype(dtype)])]
    return index, score, rows, gathered, best, *missing
