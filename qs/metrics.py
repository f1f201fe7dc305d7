"""Ranking metrics of scores: average precision and NDCG with binary relevance.

Both read the ranking that sorts scores in descending order. A positive and a negative
with equal scores are ranked pessimistically (the negative first), so the metric is the
lowest over the orderings the scores allow; scikit-learn treats ties otherwise (AP: one
threshold for the tied block; NDCG: averaged over the tied block), and the two agree
whenever no positive ties a negative.

Every metric here takes the labels first and the scores second, as scikit-learn's do
(``y_true, y_score``); :func:`qs.inference.lai` takes the scores first, as torch losses do.
"""

import numpy as np

from qs.losses import LOSSES
from qs.validation import as_positive_mask, as_scores, check_finite

__all__ = ["average_precision", "box_iou", "mean_average_precision_at_r", "ndcg",
           "negatives_above", "nms", "recall_at_k",
           "voc_average_precision", "voc_detection_ap"]


def negatives_above(labels, scores):
    """For each positive in ranking order, how many negatives stand above it."""
    scores = as_scores(scores)
    is_pos = as_positive_mask(labels, scores.size).astype(bool)
    check_finite(scores, "the metric")
    if not is_pos.any():
        raise ValueError("labels contain no positive sample; the metric is undefined.")
    order = np.lexsort((is_pos, -scores))  # by descending score, negatives first among ties
    ranked_pos = is_pos[order]
    return np.cumsum(~ranked_pos)[ranked_pos]


def average_precision(labels, scores):
    """Average precision of the ranking by descending score (higher is better); labels
    first, as in scikit-learn's ``average_precision_score(y_true, y_score)``."""
    return 1.0 - LOSSES["ap"].value(negatives_above(labels, scores))


def ndcg(labels, scores):
    """NDCG with binary gains and discount 1/log2(1 + position) (higher is better); labels
    first, as in scikit-learn's ``ndcg_score``."""
    return 1.0 - LOSSES["ndcg"].value(negatives_above(labels, scores))


def voc_average_precision(labels, scores, ignore=None):
    """AP as the PASCAL VOC devkit computes it from VOC2010 on (higher is better).

    The area under the interpolated precision/recall curve: precision made non-increasing
    from the right (each point takes the best precision at any higher recall), summed over
    the recall steps, one step of 1/P per positive. Boxes flagged in ``ignore`` (label 0,
    "difficult") are left out, as the devkit leaves them out. Ties: pessimistic, as above
    (the devkit's stable sort instead keeps the input order among equal scores). Unlike
    scikit-learn's `average_precision_score` (no interpolation), this is never below the
    plain AP of the same ranking.
    """
    scores = as_scores(scores)
    is_pos = as_positive_mask(labels, scores.size).astype(bool)
    if ignore is not None:
        keep = ~np.asarray(ignore, dtype=bool)
        if keep.shape != scores.shape:
            raise ValueError(f"ignore must be a 1-D mask of one flag per score; got shape "
                             f"{keep.shape} for {scores.size} scores.")
        scores, is_pos = scores[keep], is_pos[keep]
    n_above = negatives_above(is_pos, scores)
    precision = np.arange(1, n_above.size + 1) / (np.arange(1, n_above.size + 1) + n_above)
    return float(np.maximum.accumulate(precision[::-1]).mean())


def box_iou(box, boxes):
    """Intersection over union of `box` with each row of `boxes`, VOC's pixel convention:
    corners (x1, y1, x2, y2) are inclusive pixel indices, so a box spans x2 - x1 + 1 pixels."""
    box = np.asarray(box, dtype=float)
    boxes = np.asarray(boxes, dtype=float).reshape(-1, 4)
    iw = np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0]) + 1
    ih = np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1]) + 1
    inter = np.clip(iw, 0, None) * np.clip(ih, 0, None)
    area = (box[2] - box[0] + 1) * (box[3] - box[1] + 1)
    areas = (boxes[:, 2] - boxes[:, 0] + 1) * (boxes[:, 3] - boxes[:, 1] + 1)
    return inter / (area + areas - inter)


def _check_boxes(boxes, n, what):
    boxes = np.asarray(boxes, dtype=float)
    if boxes.shape != (n, 4):
        raise ValueError(f"{what} must have shape ({n}, 4) as (x1, y1, x2, y2); got "
                         f"{boxes.shape}.")
    if not np.isfinite(boxes).all() or (boxes[:, 2] < boxes[:, 0]).any() \
            or (boxes[:, 3] < boxes[:, 1]).any():
        raise ValueError(f"{what} must be finite with x2 >= x1 and y2 >= y1.")
    return boxes


def nms(boxes, scores, threshold=0.3):
    """Greedy non-maximum suppression of one image's boxes for one class (as R-CNN does it):
    take the best remaining box, drop every box overlapping it with IoU above `threshold`,
    repeat. Returns the indices kept, best first; equal scores keep input order."""
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


def voc_detection_ap(image_ids, boxes, scores, ground_truth, iou_threshold=0.5):
    """Detection AP of one class as the VOC2007 devkit computes it (higher is better).

    Detections (`image_ids`, `boxes` as (x1, y1, x2, y2), `scores`) are taken by descending
    score (equal scores in input order). Each is matched to the ground-truth box of its
    image it overlaps most: a hit when IoU >= `iou_threshold` and that object is not matched
    yet; a second detection of a matched object is a false positive; a detection matched to
    a difficult object counts neither way. `ground_truth` maps an image id to
    ``(gt_boxes, difficult)``; non-difficult objects are the positives. AP is the VOC2007
    11-point interpolation: the mean over recall 0, 0.1, ..., 1 of the best precision at
    that recall or above.
    """
    scores = as_scores(scores)
    boxes = _check_boxes(boxes, scores.size, "boxes")
    image_ids = np.asarray(image_ids)
    if image_ids.shape != scores.shape:
        raise ValueError(f"image_ids must hold one id per detection; got shape "
                         f"{image_ids.shape} for {scores.size} detections.")
    check_finite(scores, "the metric")
    truth = {}
    for image, (gt_boxes, difficult) in ground_truth.items():
        difficult = np.asarray(difficult, dtype=bool).reshape(-1)
        truth[image] = (_check_boxes(gt_boxes, difficult.size, f"ground truth of {image!r}"),
                        difficult, np.zeros(difficult.size, dtype=bool))
    n_pos = sum(int((~d).sum()) for _, d, _ in truth.values())
    if n_pos == 0:
        raise ValueError("ground truth holds no non-difficult object; AP is undefined.")
    order = np.argsort(-scores, kind="stable")
    hit = np.zeros(scores.size, dtype=bool)
    counted = np.zeros(scores.size, dtype=bool)
    for k in order:
        gt_boxes, difficult, matched = truth.get(image_ids[k], (np.empty((0, 4)), (), ()))
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
        raise ValueError(f"embeddings must be 2-D (n, size) with one label each; got shapes "
                         f"{x.shape} and {labels.shape}.")
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


def mean_average_precision_at_r(embeddings, labels):
    """mAP@R (Musgrave et al., ECCV 2020) of every sample as a query against the others by
    cosine similarity (higher is better): with R the number of the query's class among the
    others, the mean over the R nearest of precision at each that is of the class, over R;
    averaged over the queries with R > 0."""
    relevant, r = _neighbour_relevance(embeddings, labels, "mAP@R")
    position = np.arange(1, relevant.shape[1] + 1)
    within = position[None, :] <= r[:, None]
    precision = np.cumsum(relevant, axis=1) / position
    return float(np.mean((precision * (relevant & within)).sum(axis=1) / r))


def recall_at_k(embeddings, labels, k):
    """Recall@k of image retrieval (higher is better): the share of the queries, each sample
    against the others by cosine similarity, with a sample of its class among its k
    nearest; over the queries whose class has another sample."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}.")
    relevant, _ = _neighbour_relevance(embeddings, labels, "recall@k")
    return float(relevant[:, :k].any(axis=1).mean())
