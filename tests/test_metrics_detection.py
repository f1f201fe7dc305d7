"""VOC2007 detection evaluation (qs.metrics): box IoU, non-maximum suppression and 11-point
detection AP, on cases worked by hand and against a line-by-line port of the devkit."""

import numpy as np
import pytest

from qs.metrics import box_iou, nms, voc_detection_ap


def devkit_det_ap(image_ids, boxes, scores, gt, minoverlap=0.5):
    """Slow port of the VOC2007 devkit's VOCevaldet (11-point AP), loop by loop."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable, like MATLAB's sort
    detected = {im: [False] * len(d) for im, (_, d) in gt.items()}
    npos = sum(not x for _, d in gt.values() for x in d)
    tp, fp = [], []
    for k in order:
        bb = boxes[k]
        ovmax, jmax = -np.inf, -1
        gboxes, diff = gt.get(image_ids[k], ([], []))
        for j, bbgt in enumerate(gboxes):
            bi = [
                max(bb[0], bbgt[0]),
                max(bb[1], bbgt[1]),
                min(bb[2], bbgt[2]),
                min(bb[3], bbgt[3]),
            ]
            iw, ih = bi[2] - bi[0] + 1, bi[3] - bi[1] + 1
            if iw > 0 and ih > 0:
                ua = (
                    (bb[2] - bb[0] + 1) * (bb[3] - bb[1] + 1)
                    + (bbgt[2] - bbgt[0] + 1) * (bbgt[3] - bbgt[1] + 1)
                    - iw * ih
                )
                if iw * ih / ua > ovmax:
                    ovmax, jmax = iw * ih / ua, j
        if ovmax >= minoverlap:
            if diff[jmax]:
                tp.append(0)
                fp.append(0)
            elif not detected[image_ids[k]][jmax]:
                detected[image_ids[k]][jmax] = True
                tp.append(1)
                fp.append(0)
            else:
                tp.append(0)
                fp.append(1)
        else:
            tp.append(0)
            fp.append(1)
    tp, fp = np.cumsum(tp), np.cumsum(fp)
    rec = tp / npos
    with np.errstate(invalid="ignore"):
        prec = tp / (tp + fp)
    ap = 0.0
    for t in np.arange(0, 1.1, 0.1):
        p = prec[rec >= t]
        p = p[~np.isnan(p)]
        ap += (p.max() if p.size else 0.0) / 11
    return ap


def test_iou_uses_inclusive_pixels():
    assert box_iou([1, 1, 10, 10], [[1, 1, 10, 10]]) == pytest.approx([1.0])
    # 10x10 boxes sharing a 5x10 strip: 50 / (100 + 100 - 50)
    assert box_iou([1, 1, 10, 10], [[6, 1, 15, 10]]) == pytest.approx([50 / 150])
    assert box_iou([1, 1, 10, 10], [[11, 1, 20, 10], [30, 30, 40, 40]]).tolist() == [0.0, 0.0]


def test_nms_by_hand():
    boxes = np.array([[1, 1, 10, 10], [2, 1, 11, 10], [30, 30, 40, 40], [1, 1, 10, 10]])
    scores = np.array([0.5, 0.9, 0.3, 0.9])
    # 1 (0.9) first; 3 ties it, later in the input, and overlaps it (IoU 90/110) -> dropped;
    # 0 overlaps 1 -> dropped; 2 stands alone
    assert nms(boxes, scores, threshold=0.3).tolist() == [1, 2]
    # at 0.95, 3 survives 1 (IoU 0.82), and 0, identical to 3, does not
    assert nms(boxes, scores, threshold=0.95).tolist() == [1, 3, 2]
    with pytest.raises(ValueError, match=r"boxes must have shape \(4, 4\)"):
        nms(boxes[:, :3], scores)
    with pytest.raises(ValueError, match="x2 >= x1"):
        nms([[5, 1, 1, 5]], [1.0])


def test_detection_ap_by_hand():
    gt = {
        "a": ([[1, 1, 10, 10], [50, 50, 60, 60]], [False, True]),
        "b": ([[1, 1, 10, 10]], [False]),
    }
    ids = ["a", "a", "a", "b", "b"]
    boxes = [
        [1, 1, 10, 10],  # hit (a, object 0)
        [1, 1, 10, 10],  # duplicate of a's object 0: false positive
        [50, 50, 60, 60],  # on a difficult object: ignored
        [30, 30, 40, 40],  # no overlap: false positive
        [2, 2, 10, 10],
    ]  # IoU 81/100 with b's object: hit
    scores = [0.9, 0.8, 0.7, 0.6, 0.5]
    # counted ranking: hit, fp, fp, hit -> recall .5 .5 .5 1, precision 1 .5 1/3 .5
    # 11-point: recall 0..0.5 (6 points) best precision 1; 0.6..1 (5 points) 0.5
    expected = (6 * 1.0 + 5 * 0.5) / 11
    assert voc_detection_ap(ids, boxes, scores, gt) == pytest.approx(expected)
    assert devkit_det_ap(ids, boxes, scores, gt) == pytest.approx(expected)
    # a stricter threshold turns b's hit (IoU 0.81) into a false positive
    strict = (6 * 1.0 + 5 * 0.0) / 11
    assert voc_detection_ap(ids, boxes, scores, gt, iou_threshold=0.85) == pytest.approx(strict)


def test_detection_ap_matches_the_devkit_port_on_random_cases():
    rng = np.random.default_rng(0)
    for _ in range(200):
        images = [f"im{i}" for i in range(rng.integers(1, 5))]
        gt = {}
        for im in images:
            m = rng.integers(0, 4)
            xy = rng.integers(1, 60, size=(m, 2))
            wh = rng.integers(5, 30, size=(m, 2))
            gt[im] = (np.hstack([xy, xy + wh]), rng.random(m) < 0.2)
        if sum((~d).sum() for _, d in gt.values()) == 0:
            continue
        n = rng.integers(1, 25)
        ids = list(rng.choice(images, n))
        xy = rng.integers(1, 60, size=(n, 2))
        boxes = np.hstack([xy, xy + rng.integers(5, 30, size=(n, 2))])
        scores = np.round(rng.random(n), 1)  # ties happen
        assert voc_detection_ap(ids, boxes, scores, gt) == pytest.approx(
            devkit_det_ap(ids, boxes.tolist(), list(scores), gt), abs=1e-12
        )


def test_detection_ap_errors():
    with pytest.raises(ValueError, match="no non-difficult object"):
        voc_detection_ap(["a"], [[1, 1, 5, 5]], [1.0], {"a": ([[1, 1, 5, 5]], [True])})
    with pytest.raises(ValueError, match="scores must be finite"):
        voc_detection_ap(["a"], [[1, 1, 5, 5]], [np.nan], {"a": ([[1, 1, 5, 5]], [False])})
    with pytest.raises(ValueError, match="one id per detection"):
        voc_detection_ap(["a", "b"], [[1, 1, 5, 5]], [1.0], {"a": ([[1, 1, 5, 5]], [False])})
