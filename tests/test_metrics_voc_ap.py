"""VOC devkit AP (VOC2010+): a hand-worked case, a line-by-line port of the devkit, sklearn."""

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from qs.metrics import average_precision, voc_average_precision


def devkit_ap(gt, out):
    """Slow port of VOCevalcls + VOCap: gt is 1 / -1 / 0 (difficult); stable sort of -out."""
    order = sorted(range(len(out)), key=lambda i: -out[i])  # Python's sort is stable
    tp = fp = 0
    rec, prec = [], []
    n_pos = sum(g > 0 for g in gt)
    for i in order:
        tp += gt[i] > 0
        fp += gt[i] < 0
        if gt[i] != 0:  # a difficult box is neither true nor false positive: no new point
            rec.append(tp / n_pos)
            prec.append(tp / (tp + fp))
    mrec, mpre = [0.0] + rec + [1.0], [0.0] + prec + [0.0]
    for i in range(len(mpre) - 2, -1, -1):
        mpre[i] = max(mpre[i], mpre[i + 1])
    return sum(
        (mrec[i] - mrec[i - 1]) * mpre[i] for i in range(1, len(mrec)) if mrec[i] != mrec[i - 1]
    )


def test_hand_computed_example():
    # ranking: + - - + +   precisions at the positives: 1, 2/4, 3/5
    labels, scores = [1, 0, 0, 1, 1], [5, 4, 3, 2, 1]
    # interpolated: 1, max(2/4, 3/5), 3/5  ->  (1 + 0.6 + 0.6) / 3
    assert voc_average_precision(labels, scores) == pytest.approx(2.2 / 3, rel=1e-15)
    # scikit-learn does not interpolate: (1 + 0.5 + 0.6) / 3
    assert average_precision_score(labels, scores) == pytest.approx(0.7, rel=1e-15)
    assert average_precision(labels, scores) == pytest.approx(0.7, rel=1e-15)


def test_difficult_boxes_are_ignored():
    labels, scores = np.array([1, 0, 0, 1, 1]), np.array([5, 4, 3, 2, 1.0])
    ignore = np.array([False, True, False, False, False])
    # without the box at rank 2: + - + +  ->  (1 + 3/4 + 3/4) / 3
    assert voc_average_precision(labels, scores, ignore=ignore) == pytest.approx(2.5 / 3)
    assert voc_average_precision(labels, scores, ignore=ignore) == pytest.approx(
        devkit_ap([1, 0, -1, 1, 1], list(scores))
    )
    with pytest.raises(ValueError, match="ignore must be a 1-D mask of one flag per score"):
        voc_average_precision(labels, scores, ignore=[True, False])
    with pytest.raises(ValueError, match="no positive"):
        voc_average_precision(labels, scores, ignore=labels == 1)


@pytest.mark.parametrize("seed", range(30))
def test_matches_the_devkit_port(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    gt = rng.choice([1, -1, 0], size=n, p=[0.3, 0.6, 0.1])
    gt[0] = 1
    scores = rng.normal(size=n)  # no ties: the devkit's stable sort then does not matter
    comp = voc_average_precision(gt == 1, scores, ignore=gt == 0)
    assert comp == pytest.approx(devkit_ap(list(gt), list(scores)), rel=1e-12)
    keep = gt != 0
    assert comp >= average_precision_score(gt[keep] == 1, scores[keep]) - 1e-12


def test_ties_are_pessimistic():
    # a positive tied with a negative is ranked below it, whatever the input order:
    # - + +  ->  precisions 1/2, 2/3, interpolated 2/3, 2/3
    labels, scores = [1, 0, 1], [1.0, 1.0, 0.0]
    assert voc_average_precision(labels, scores) == pytest.approx(2 / 3)
    assert voc_average_precision(labels[1::-1] + [1], [1.0, 1.0, 0.0]) == pytest.approx(2 / 3)
    # the devkit's stable sort keeps the input order: + - +  ->  (1 + 2/3) / 2
    assert devkit_ap([1, -1, 1], scores) == pytest.approx(5 / 6)
    assert devkit_ap([-1, 1, 1], scores) == pytest.approx(2 / 3)


def test_invariant_to_increasing_transforms():
    rng = np.random.default_rng(7)
    labels, scores = rng.random(50) < 0.3, rng.normal(size=50)
    labels[0] = True
    ap = voc_average_precision(labels, scores)
    assert voc_average_precision(labels, 3 * scores - 2) == pytest.approx(ap, rel=1e-15)
    assert voc_average_precision(labels, np.exp(scores)) == pytest.approx(ap, rel=1e-15)
    assert voc_average_precision(labels, labels.astype(float)) == 1.0
