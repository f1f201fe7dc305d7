"""Ranking metrics of scores: average precision and NDCG with binary relevance; their means
over queries with graded relevance (learning to rank); retrieval and detection metrics.

All read the ranking that sorts scores in descending order. Equal scores are ranked
pessimistically (a negative before a positive, a lower label before a higher one), so the
metric is the lowest over the orderings the scores allow; scikit-learn treats ties otherwise
(AP: one threshold for the tied block; NDCG: averaged over the tied block), and the two
agree whenever no positive ties a negative. trec_eval breaks ties by document name
(docs/ltr_metrics.md lists its conventions beside ours).

Every metric here takes the labels first and the scores second, as scikit-learn's do
(``y_true, y_score``); `qs.inference.lai` takes the scores first, as torch losses do.
"""

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from qs.losses import LOSSES
from qs.validation import as_positive_mask, as_scores, check_finite

__all__ = [
    "QueryMetric",
    "average_precision",
    "box_iou",
    "mean_average_precision",
    "mean_average_precision_at_r",
    "ndcg",
    "ndcg_at_k",
    "negatives_above",
    "nms",
    "precision_at_k",
    "recall_at_k",
    "voc_average_precision",
    "voc_detection_ap",
]


def negatives_above(labels: ArrayLike, scores: ArrayLike) -> np.ndarray:
    """For each positive in ranking order, how many negatives stand above it.

    Parameters
    ----------
    labels : array_like of shape (n,)
        1 (or True) at the positives, 0, -1 (or False) at the negatives.
    scores : array_like of shape (n,)
        Finite scores; the ranking sorts them in descending order, a negative before a
        positive among equal scores.

    Returns
    -------
    ndarray of shape (P,)
        The count of negatives above each positive, best positive first.

    Raises
    ------
    ValueError
        On non-finite scores, labels that are not binary, or no positive.

    Examples
    --------
    >>> from qs.metrics import negatives_above
    >>> negatives_above([1, 0, 1, 0], [2.0, 1.0, 0.5, -1.0]).tolist()
    [0, 1]
    """
    scores = as_scores(scores)
    is_pos = as_positive_mask(labels, scores.size).astype(bool)
    check_finite(scores, "the metric")
    if not is_pos.any():
        raise ValueError("labels contain no positive sample; the metric is undefined.")
    order = np.lexsort((is_pos, -scores))  # by descending score, negatives first among ties
    ranked_pos = is_pos[order]
    return np.cumsum(~ranked_pos)[ranked_pos]


def average_precision(labels: ArrayLike, scores: ArrayLike) -> float:
    """Average precision of the ranking by descending score (higher is better).

    Labels first, as in scikit-learn's ``average_precision_score(y_true, y_score)``.

    Parameters
    ----------
    labels : array_like of shape (n,)
        1 (or True) at the positives, 0, -1 (or False) at the negatives; at least one
        positive.
    scores : array_like of shape (n,)
        Finite scores.

    Returns
    -------
    float
        The mean over the positives of the precision at each.

    Examples
    --------
    >>> from qs.metrics import average_precision
    >>> round(average_precision([1, 0, 1, 0], [2.0, 1.0, 0.5, -1.0]), 4)
    0.8333
    """
    return 1.0 - float(LOSSES["ap"].value(negatives_above(labels, scores)))


def ndcg(labels: ArrayLike, scores: ArrayLike) -> float:
    """NDCG with binary gains and discount 1/log2(1 + position) (higher is better).

    Labels first, as in scikit-learn's ``ndcg_score``.

    Parameters
    ----------
    labels : array_like of shape (n,)
        1 (or True) at the positives, 0, -1 (or False) at the negatives; at least one
        positive.
    scores : array_like of shape (n,)
        Finite scores.

    Returns
    -------
    float
        The discounted gain of the ranking over that of the ideal ranking.

    Examples
    --------
    >>> from qs.metrics import ndcg
    >>> round(ndcg([1, 0, 1, 0], [2.0, 1.0, 0.5, -1.0]), 4)
    0.9197
    """
    return 1.0 - float(LOSSES["ndcg"].value(negatives_above(labels, scores)))


def voc_average_precision(
    labels: ArrayLike, scores: ArrayLike, ignore: ArrayLike | None = None
) -> float:
    """AP as the PASCAL VOC devkit computes it from VOC2010 on (higher is better).

    Parameters
    ----------
    labels : array_like of shape (n,)
        1 (or True) at the positives, 0, -1 (or False) at the negatives.
    scores : array_like of shape (n,)
        Finite scores.
    ignore : array_like of shape (n,), optional
        True at the samples left out ("difficult", label 0 in the devkit's files).

    Returns
    -------
    float
        The area under the interpolated precision/recall curve.

    Notes
    -----
    Precision is made non-increasing from the right (each point takes the best precision at
    any higher recall), then summed over the recall steps, one step of 1/P per positive.
    Ties are pessimistic, as everywhere here (the devkit's stable sort keeps the input order
    among equal scores instead). Unlike scikit-learn's `average_precision_score` (no
    interpolation), this is never below the plain AP of the same ranking.

    Examples
    --------
    >>> from qs.metrics import voc_average_precision
    >>> round(voc_average_precision([1, 0, 1, 0], [2.0, 1.0, 0.5, -1.0]), 4)
    0.8333
    """
    scores = as_scores(scores)
    is_pos = as_positive_mask(labels, scores.size).astype(bool)
    if ignore is not None:
        keep = ~np.asarray(ignore, dtype=bool)
        if keep.shape != scores.shape:
            raise ValueError(
                f"ignore must be a 1-D mask of one flag per score; got shape "
                f"{keep.shape} for {scores.size} scores."
            )
        scores, is_pos = scores[keep], is_pos[keep]
    n_above = negatives_above(is_pos, scores)
    precision = np.arange(1, n_above.size + 1) / (np.arange(1, n_above.size + 1) + n_above)
    return float(np.maximum.accumulate(precision[::-1]).mean())


def box_iou(box: ArrayLike, boxes: ArrayLike) -> np.ndarray:
    """Intersection over union of `box` with each row of `boxes`, VOC's pixel convention.

    Parameters
    ----------
    box : array_like of shape (4,)
        Corners (x1, y1, x2, y2), inclusive pixel indices: a box spans x2 - x1 + 1 pixels.
    boxes : array_like of shape (k, 4)
        Boxes in the same convention.

    Returns
    -------
    ndarray of shape (k,)
        The IoU of `box` with each row.

    Examples
    --------
    >>> from qs.metrics import box_iou
    >>> np.round(box_iou([0, 0, 9, 9], [[0, 0, 9, 9], [5, 0, 14, 9]]), 4).tolist()
    [1.0, 0.3333]
    """
    box = np.asarray(box, dtype=float)
    boxes = np.asarray(boxes, dtype=float).reshape(-1, 4)
    iw = np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0]) + 1
    ih = np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1]) + 1
    inter = np.clip(iw, 0, None) * np.clip(ih, 0, None)
    area = (box[2] - box[0] + 1) * (box[3] - box[1] + 1)
    areas = (boxes[:, 2] - boxes[:, 0] + 1) * (boxes[:, 3] - boxes[:, 1] + 1)
    return inter / (area + areas - inter)


def _check_boxes(boxes: ArrayLike, n: int, what: str) -> np.ndarray:
    boxes = np.asarray(boxes, dtype=float)
    if boxes.shape != (n, 4):
        raise ValueError(f"{what} must have shape ({n}, 4) as (x1, y1, x2, y2); got {boxes.shape}.")
    if (
        not np.isfinite(boxes).all()
        or (boxes[:, 2] < boxes[:, 0]).any()
        or (boxes[:, 3] < boxes[:, 1]).any()
    ):
        raise ValueError(f"{what} must be finite with x2 >= x1 and y2 >= y1.")
    return boxes


def nms(boxes: ArrayLike, scores: ArrayLike, threshold: float = 0.3) -> np.ndarray:
    """Greedy non-maximum suppression of one image's boxes for one class, as R-CNN does it.

    Take the best remaining box, drop every box overlapping it with IoU above `threshold`,
    repeat.

    Parameters
    ----------
    boxes : array_like of shape (n, 4)
        Corners (x1, y1, x2, y2), finite, with x2 >= x1 and y2 >= y1.
    scores : array_like of shape (n,)
        Finite scores of the boxes.
    threshold : float, default 0.3
        The IoU above which a box is dropped.

    Returns
    -------
    ndarray of int
        The indices kept, best first; equal scores keep input order.

    Examples
    --------
    >>> from qs.metrics import nms
    >>> nms([[0, 0, 9, 9], [1, 1, 10, 10], [20, 20, 29, 29]], [0.9, 0.8, 0.7]).tolist()
    [0, 2]
    """
    scores = as_scores(scores)
    boxes = _check_boxes(boxes, scores.size, "boxes")
    check_finite(scores, "suppression")
    order = np.argsort(-scores, kind="stable")
    keep = []
    while order.size:
        best = order[0]
        keep.append(best)
        order = order[1:][box_iou(boxes[best], boxes[order[1:]]) <= threshold]
    return np.array(keep, dtype=np.intp)


def voc_detection_ap(
    image_ids: ArrayLike,
    boxes: ArrayLike,
    scores: ArrayLike,
    ground_truth: dict,
    iou_threshold: float = 0.5,
) -> float:
    """Detection AP of one class as the VOC2007 devkit computes it (higher is better).

    Parameters
    ----------
    image_ids : array_like of shape (n,)
        The image of each detection.
    boxes : array_like of shape (n, 4)
        The detections' boxes as (x1, y1, x2, y2).
    scores : array_like of shape (n,)
        The detections' scores; taken by descending score, equal scores in input order.
    ground_truth : dict
        Image id -> ``(gt_boxes, difficult)``: the objects' boxes (k, 4) and a flag per
        object; the non-difficult objects are the positives.
    iou_threshold : float, default 0.5
        The overlap a detection needs to hit an object.

    Returns
    -------
    float
        VOC2007's 11-point interpolated AP: the mean over recall 0, 0.1, ..., 1 of the best
        precision at that recall or above.

    Raises
    ------
    ValueError
        On shapes that differ, non-finite values, or no non-difficult object.

    Notes
    -----
    Each detection is matched to the ground-truth box of its image it overlaps most: a hit
    when IoU >= `iou_threshold` and that object is not matched yet; a second detection of a
    matched object is a false positive; a detection matched to a difficult object counts
    neither way.

    Examples
    --------
    >>> from qs.metrics import voc_detection_ap
    >>> truth = {"a": ([[0, 0, 9, 9]], [False])}
    >>> voc_detection_ap(["a", "a"], [[0, 0, 9, 9], [0, 0, 9, 9]], [0.9, 0.8], truth)
    1.0
    """
    scores = as_scores(scores)
    boxes = _check_boxes(boxes, scores.size, "boxes")
    image_ids = np.asarray(image_ids)
    if image_ids.shape != scores.shape:
        raise ValueError(
            f"image_ids must hold one id per detection; got shape "
            f"{image_ids.shape} for {scores.size} detections."
        )
    check_finite(scores, "the metric")
    truth = {}
    for image, (gt_boxes, difficult) in ground_truth.items():
        difficult = np.asarray(difficult, dtype=bool).reshape(-1)
        truth[image] = (
            _check_boxes(gt_boxes, difficult.size, f"ground truth of {image!r}"),
            difficult,
            np.zeros(difficult.size, dtype=bool),
        )
    n_pos = sum(int((~d).sum()) for _, d, _ in truth.values())
    if n_pos == 0:
        raise ValueError("ground truth holds no non-difficult object; AP is undefined.")
    order = np.argsort(-scores, kind="stable")
    hit = np.zeros(scores.size, dtype=bool)
    counted = np.zeros(scores.size, dtype=bool)
    for k in order:
        gt_boxes, difficult, matched = truth.get(
            image_ids[k], (np.empty((0, 4)), np.zeros(0, bool), np.zeros(0, bool))
        )
        counted[k] = True
        if len(gt_boxes):
            overlaps = box_iou(boxes[k], gt_boxes)
            best = int(np.argmax(overlaps))
            if overlaps[best] >= iou_threshold:
                if difficult[best]:
                    counted[k] = False
                elif not matched[best]:
                    hit[k] = matched[best] = True
    ranked = order[counted[order]]
    tp = np.cumsum(hit[ranked])
    recall = tp / n_pos
    precision = tp / np.arange(1, ranked.size + 1)
    points = [precision[recall >= t].max(initial=0.0) for t in np.linspace(0, 1, 11)]
    return float(np.mean(points))


# ---------------------------------------------------------------------------- retrieval


def _neighbour_relevance(embeddings, labels, metric):
    """Each sample a query against all the others, ranked by cosine similarity, over the
    queries whose class has another sample: (relevance (queries, n - 1) bool, True where the
    neighbour at that position shares the query's class; R (queries,), the number of the
    query's class among the others). Equal similarities keep the neighbours' order in the
    input. No such query is an error naming `metric`."""
    x = np.asarray(embeddings, dtype=np.float64)
    labels = np.asarray(labels)
    if x.ndim != 2 or labels.ndim != 1 or len(labels) != len(x):
        raise ValueError(
            f"embeddings must be 2-D (n, size) with one label each; got shapes "
            f"{x.shape} and {labels.shape}."
        )
    if len(x) < 2:
        raise ValueError(f"retrieval needs at least 2 samples; got {len(x)}.")
    if not np.isfinite(x).all():
        raise ValueError("embeddings must be finite.")
    unit = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)  # a query is not its own neighbour
    order = np.argsort(-sims, axis=1, kind="stable")[:, :-1]  # the query itself last: cut
    relevant = labels[order] == labels[:, None]
    r = relevant.sum(axis=1)
    if not (r > 0).any():
        raise ValueError(f"no class has two samples; {metric} is undefined.")
    return relevant[r > 0], r[r > 0]


def mean_average_precision_at_r(embeddings: ArrayLike, labels: ArrayLike) -> float:
    """mAP@R (Musgrave et al., ECCV 2020) of every sample as a query against the others.

    Parameters
    ----------
    embeddings : array_like of shape (n, d)
        Finite embeddings, compared by cosine similarity.
    labels : array_like of shape (n,)
        The class of each sample.

    Returns
    -------
    float
        With R the number of the query's class among the others: the mean over the R nearest
        of the precision at each that is of the class, over R; averaged over the queries
        with R > 0.

    Examples
    --------
    >>> from qs.metrics import mean_average_precision_at_r
    >>> x = [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]]
    >>> mean_average_precision_at_r(x, [0, 0, 1, 1])
    1.0
    """
    relevant, r = _neighbour_relevance(embeddings, labels, "mAP@R")
    position = np.arange(1, relevant.shape[1] + 1)
    within = position[None, :] <= r[:, None]
    precision = np.cumsum(relevant, axis=1) / position
    return float(np.mean((precision * (relevant & within)).sum(axis=1) / r))


def recall_at_k(embeddings: ArrayLike, labels: ArrayLike, k: int) -> float:
    """Recall@k of image retrieval (higher is better).

    Parameters
    ----------
    embeddings : array_like of shape (n, d)
        Finite embeddings, compared by cosine similarity.
    labels : array_like of shape (n,)
        The class of each sample.
    k : int
        How many nearest neighbours count.

    Returns
    -------
    float
        The share of the queries (each sample against the others) with a sample of its class
        among its k nearest, over the queries whose class has another sample.

    Examples
    --------
    >>> from qs.metrics import recall_at_k
    >>> x = [[1.0, 0.0], [0.0, 1.0], [0.9, 0.1], [0.1, 0.9]]
    >>> recall_at_k(x, [0, 1, 1, 0], k=1)
    0.0
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}.")
    relevant, _ = _neighbour_relevance(embeddings, labels, "recall@k")
    return float(relevant[:, :k].any(axis=1).mean())


# ---------------------------------------------------------------------- learning to rank

_GAINS = ("exponential", "linear")


class QueryMetric(NamedTuple):
    """A ranking metric over queries: its mean, and its value per query.

    Attributes
    ----------
    mean : float
        The mean over the queries counted.
    query_ids : ndarray
        The queries, in sorted order, as `numpy.unique` gives them.
    values : ndarray of float64
        Each query's value; NaN for a query left out of the mean
        (``no_relevant="exclude"``).

    Examples
    --------
    >>> result = mean_average_precision([1, 0, 0, 1], [0.9, 0.8, 0.7, 0.6], ["a", "a", "b", "b"],
    ...                                 per_query=True)
    >>> result.mean, result.query_ids.tolist(), result.values.tolist()
    (0.75, ['a', 'b'], [1.0, 0.5])
    """

    mean: float
    query_ids: np.ndarray
    values: np.ndarray


def mean_average_precision(
    y_true: ArrayLike,
    y_score: ArrayLike,
    groups: ArrayLike,
    *,
    threshold: float = 0.0,
    no_relevant: float | str = 0.0,
    per_query: bool = False,
) -> float | QueryMetric:
    """Mean over queries of the average precision (AP) of each query's ranking by score.

    A document is relevant when its label is above ``threshold``. A query's AP is the mean,
    over its relevant documents, of the precision at the rank of each. Equal scores are
    ranked pessimistically (lower labels first): the value is the lowest the ties allow.

    Parameters
    ----------
    y_true : array-like of shape (n_documents,)
        Relevance labels, graded or binary (finite numbers or bools).
    y_score : array-like of shape (n_documents,)
        Scores (finite); a higher score ranks a document higher within its query.
    groups : array-like of shape (n_documents,)
        The query id of each document (integers or strings); a query's documents need not
        be contiguous.
    threshold : float, default=0.0
        A document is relevant when its label is above it.
    no_relevant : float or "exclude", default=0.0
        The AP given to a query without a relevant document (a number in [0, 1]; 0 is
        trec_eval's value), or "exclude" to leave such queries out of the mean.
    per_query : bool, default=False
        Return a `QueryMetric`: the mean and each query's value.

    Returns
    -------
    float or QueryMetric
        The mean AP over the queries (higher is better); with ``per_query``, the mean and the
        value of each query.

    Raises
    ------
    ValueError
        Arrays not 1-D or of different lengths, no document, labels or scores not finite, a
        bad option, or with ``no_relevant="exclude"`` no query with a relevant document.

    See Also
    --------
    ndcg_at_k, precision_at_k, average_precision

    Examples
    --------
    >>> from qs.metrics import mean_average_precision
    >>> mean_average_precision([1, 0, 0, 1], [0.9, 0.8, 0.7, 0.6], ["a", "a", "b", "b"])
    0.75
    >>> mean_average_precision([2, 0, 1], [0.9, 0.8, 0.7], [5, 5, 5], threshold=1)
    1.0
    >>> mean_average_precision([1, 0, 0, 0], [0.5, 0.5, 1.0, 0.0], [1, 1, 2, 2],
    ...                        per_query=True, no_relevant="exclude")
    QueryMetric(mean=0.5, query_ids=array([1, 2]), values=array([0.5, nan]))
    """
    threshold = _real(threshold, "threshold")
    ranked = _ranked(y_true, y_score, groups, no_relevant)
    relevant = (ranked.labels > threshold).astype(np.float64)
    n_relevant = ranked.per_query(relevant)
    precision = _cumsum_within(relevant, ranked) / ranked.position
    values = ranked.per_query(precision * relevant) / np.maximum(n_relevant, 1)
    return _summary(values, n_relevant == 0, ranked, no_relevant, "AP", per_query)


def ndcg_at_k(
    y_true: ArrayLike,
    y_score: ArrayLike,
    groups: ArrayLike,
    *,
    k: int | None = None,
    gain: str = "exponential",
    no_relevant: float | str = 0.0,
    per_query: bool = False,
) -> float | QueryMetric:
    """Mean over queries of the NDCG of each query's ranking by score, cut at rank ``k``.

    DCG@k sums ``gain(label) / log2(1 + rank)`` over the first ``k`` ranks; NDCG@k divides it
    by the DCG@k of the ideal ranking (labels in descending order). Equal scores are ranked
    pessimistically (lower labels first): the value is the lowest the ties allow.

    Parameters
    ----------
    y_true : array-like of shape (n_documents,)
        Graded relevance labels (finite numbers >= 0, or bools).
    y_score : array-like of shape (n_documents,)
        Scores (finite); a higher score ranks a document higher within its query.
    groups : array-like of shape (n_documents,)
        The query id of each document (integers or strings).
    k : int or None, default=None
        The cutoff rank (a query of fewer documents counts them all); None: no cutoff.
    gain : {"exponential", "linear"}, default="exponential"
        ``2**label - 1`` (Burges et al.'s gain, the LETOR and LightGBM one), or the label
        itself (trec_eval's).
    no_relevant : float or "exclude", default=0.0
        The NDCG given to a query whose labels are all 0 (its ideal DCG is 0): a number in
        [0, 1] (0 as trec_eval and scikit-learn give, 1 as LightGBM gives), or "exclude" to
        leave such queries out of the mean.
    per_query : bool, default=False
        Return a `QueryMetric`: the mean and each query's value.

    Returns
    -------
    float or QueryMetric
        The mean NDCG@k over the queries (higher is better); with ``per_query``, the mean and
        the value of each query.

    Raises
    ------
    ValueError
        As `mean_average_precision`; also a negative label, an exponential gain beyond
        float64, ``k`` not a positive integer, or an unknown ``gain``.

    See Also
    --------
    mean_average_precision, precision_at_k, ndcg

    Examples
    --------
    >>> from qs.metrics import ndcg_at_k
    >>> ndcg_at_k([0, 1], [0.9, 0.1], [7, 7], k=1)
    0.0
    >>> round(ndcg_at_k([0, 1], [0.9, 0.1], [7, 7]), 4)
    0.6309
    >>> ndcg_at_k([0, 0, 2], [0.3, 0.2, 0.1], [1, 1, 2], no_relevant=1.0)
    1.0
    """
    if gain not in _GAINS:
        raise ValueError(f"gain must be one of {', '.join(_GAINS)}; got {gain!r}.")
    cutoff = None if k is None else _cutoff(k)
    ranked = _ranked(y_true, y_score, groups, no_relevant)
    if ranked.labels.min() < 0:
        raise ValueError(f"NDCG needs labels >= 0; got {float(ranked.labels.min())!r}.")
    with np.errstate(over="ignore"):
        gains = np.expm1(ranked.labels * np.log(2)) if gain == "exponential" else ranked.labels
    if not np.isfinite(gains).all():
        raise ValueError(
            f"the gain 2**label - 1 of label {float(ranked.labels.max())!r} is beyond "
            "float64; pass gain='linear' or rescale the labels."
        )
    discount = 1.0 / np.log2(1.0 + ranked.position)
    if cutoff is not None:
        discount[ranked.position > cutoff] = 0.0
    ideal = gains[np.lexsort((-gains, ranked.query))]  # each query's own rows, best first
    idcg = ranked.per_query(ideal * discount)
    values = ranked.per_query(gains * discount) / np.where(idcg > 0, idcg, 1.0)
    return _summary(values, idcg == 0, ranked, no_relevant, "NDCG", per_query)


def precision_at_k(
    y_true: ArrayLike,
    y_score: ArrayLike,
    groups: ArrayLike,
    *,
    k: int,
    threshold: float = 0.0,
    no_relevant: float | str = 0.0,
    per_query: bool = False,
) -> float | QueryMetric:
    """Mean over queries of the precision at rank ``k`` (P@k) of each query's ranking.

    P@k is the number of relevant documents (label above ``threshold``) among a query's
    first ``k``, over ``k``; a query of fewer than ``k`` documents counts the missing ranks
    as not relevant, as trec_eval does. Equal scores are ranked pessimistically (lower
    labels first): the value is the lowest the ties allow.

    Parameters
    ----------
    y_true : array-like of shape (n_documents,)
        Relevance labels, graded or binary (finite numbers or bools).
    y_score : array-like of shape (n_documents,)
        Scores (finite); a higher score ranks a document higher within its query.
    groups : array-like of shape (n_documents,)
        The query id of each document (integers or strings).
    k : int
        The cutoff rank.
    threshold : float, default=0.0
        A document is relevant when its label is above it.
    no_relevant : float or "exclude", default=0.0
        The value given to a query without a relevant document: a number in [0, 1] (its
        P@k is 0, trec_eval's value), or "exclude" to leave such queries out of the mean.
    per_query : bool, default=False
        Return a `QueryMetric`: the mean and each query's value.

    Returns
    -------
    float or QueryMetric
        The mean P@k over the queries (higher is better); with ``per_query``, the mean and
        the value of each query.

    Raises
    ------
    ValueError
        As `mean_average_precision`; also ``k`` not a positive integer.

    See Also
    --------
    mean_average_precision, ndcg_at_k

    Examples
    --------
    >>> from qs.metrics import precision_at_k
    >>> precision_at_k([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.6], [1, 1, 1, 1], k=2)
    0.5
    >>> precision_at_k([1, 0], [0.9, 0.8], [1, 1], k=4)
    0.25
    """
    cutoff = _cutoff(k)
    threshold = _real(threshold, "threshold")
    ranked = _ranked(y_true, y_score, groups, no_relevant)
    relevant = (ranked.labels > threshold).astype(np.float64)
    values = ranked.per_query(relevant * (ranked.position <= cutoff)) / cutoff
    return _summary(
        values, ranked.per_query(relevant) == 0, ranked, no_relevant, f"P@{k}", per_query
    )


class _Ranked(NamedTuple):
    """Documents sorted by query, then by descending score, then by ascending label (the
    pessimistic order of ties): per row its ``query`` (an index into ``query_ids``), label
    and 1-based ``position`` in its query's ranking."""

    query: np.ndarray
    labels: np.ndarray
    position: np.ndarray
    starts: np.ndarray
    query_ids: np.ndarray

    def per_query(self, values):
        """The sum of ``values`` (one per row) over each query's rows."""
        return np.bincount(self.query, weights=values, minlength=self.query_ids.size)


def _ranked(y_true, y_score, groups, no_relevant):
    """Check the inputs of a ranking metric once; the rows in ranking order (`_Ranked`)."""
    scores = as_scores(y_score)
    labels = np.asarray(y_true)
    if labels.ndim != 1 or labels.dtype.kind not in "biuf":
        raise ValueError(
            f"y_true must be a 1-D array of numeric labels; got dtype "
            f"{labels.dtype} of shape {labels.shape}."
        )
    groups = np.asarray(groups)
    if scores.size == 0 and labels.size == groups.size == 0:
        raise ValueError("no documents: y_true, y_score and groups are empty.")
    if groups.ndim != 1 or groups.dtype.kind not in "biuUSO":
        raise ValueError(
            f"groups must be a 1-D array of query ids (integers or strings); got "
            f"dtype {groups.dtype} of shape {groups.shape}."
        )
    if not labels.size == scores.size == groups.size:
        raise ValueError(
            f"y_true, y_score and groups must have one entry per document; got "
            f"lengths {labels.size}, {scores.size} and {groups.size}."
        )
    labels = labels.astype(np.float64)
    if not np.isfinite(labels).all():
        bad = int(np.flatnonzero(~np.isfinite(labels))[0])
        raise ValueError(f"y_true must be finite; got {float(labels[bad])!r} at index {bad}.")
    check_finite(scores, "the metric")
    if not (isinstance(no_relevant, str) and no_relevant == "exclude") and not (
        isinstance(no_relevant, (int, float, np.integer, np.floating))
        and not isinstance(no_relevant, bool)
        and 0 <= no_relevant <= 1
    ):
        raise ValueError(
            f"no_relevant must be 'exclude' or a number in [0, 1]; got {no_relevant!r}."
        )
    try:
        query_ids, query = np.unique(groups, return_inverse=True)
    except TypeError:
        raise ValueError("groups must hold query ids of one type (integers or strings).") from None
    query = query.reshape(-1)
    order = np.lexsort((labels, -scores, query))
    query = query[order]
    starts = np.flatnonzero(np.r_[True, query[1:] != query[:-1]])
    position = np.arange(1, query.size + 1) - starts[query]
    return _Ranked(query, labels[order], position.astype(np.float64), starts, query_ids)


def _cumsum_within(values, ranked):
    """The running sum of ``values`` (one per row) within each query."""
    total = np.cumsum(values)
    before = total[ranked.starts] - values[ranked.starts]
    return total - before[ranked.query]


def _summary(values, empty, ranked, no_relevant, name, per_query):
    """The mean of the per-query ``values``, those of the queries ``empty`` (no relevant
    document) replaced by ``no_relevant`` or, when it is "exclude", left out."""
    values = values.copy()
    values[empty] = np.nan if isinstance(no_relevant, str) else float(no_relevant)
    if empty.all() and isinstance(no_relevant, str):
        raise ValueError(
            f"no query has a relevant document, so every query is excluded "
            f"(no_relevant='exclude'); {name} is undefined."
        )
    mean = float(np.nanmean(values))
    return QueryMetric(mean, ranked.query_ids, values) if per_query else mean


def _real(value, name):
    """A finite real number option, as a float."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not np.isfinite(value)
    ):
        raise ValueError(f"{name} must be a finite number; got {value!r}.")
    return float(value)


def _cutoff(k):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}.")
    return int(k)
