"""Scoring padded bags of boxes (qs.detection.score_bags): best boxes and detections against
loops over the images, the same result in memory, on Dask's threads, from a zarr array and on
a dask.distributed cluster, and bad input named."""

import ast
import inspect

import numpy as np
import pytest

from qs import detection
from qs.detection import bag_argmax, score_bags
from qs.metrics import nms
from qs.top_boxes import top_boxes


def padded_bags(seed, n=23, k=9, d=6, dtype=np.float32, ties=False):
    """Padded bags with 1..k valid boxes each; padding rows hold large values, which must
    never win; boxes as x1 y1 x2 y2."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, k + 1, n)
    if ties:
        features = rng.integers(0, 2, (n, k, d)).astype(dtype)
    else:
        features = rng.normal(size=(n, k, d)).astype(dtype)
    for i in range(n):
        features[i, counts[i] :] = 50.0
    corner = rng.integers(1, 80, (n, k, 2))
    boxes = np.concatenate([corner, corner + rng.integers(5, 50, (n, k, 2))], axis=2)
    return features, counts, boxes.astype(float)


def loop_best(features, counts, W):
    """Reference: each image's first best valid box per class, one image at a time."""
    best = np.zeros((len(counts), W.shape[1]), dtype=int)
    score = np.zeros((len(counts), W.shape[1]))
    for i, n in enumerate(counts):
        s = features[i, :n].astype(np.float64) @ W
        best[i] = s.argmax(axis=0)
        score[i] = s.max(axis=0)
    return best, score


@pytest.mark.parametrize("ties", [False, True])
def test_best_box_against_a_loop(ties):
    features, counts, _ = padded_bags(0, ties=ties)
    W = np.random.default_rng(1).integers(-2, 3, (6, 4)).astype(float)
    res = score_bags(features, counts, W, rows=True)
    best, score = loop_best(features, counts, W)
    np.testing.assert_array_equal(res.best, best)  # first best box among equal scores
    np.testing.assert_allclose(res.score, score, rtol=1e-12)
    assert (res.best < counts[:, None]).all()  # padding (scored far higher) never wins
    chosen = features[np.arange(len(counts))[:, None], res.best]
    np.testing.assert_array_equal(res.rows, chosen.astype(np.float64))


def test_flat_and_padded_argmax_agree():
    features, counts, _ = padded_bags(2, ties=True)
    w = np.array([1.0, -1.0, 2.0, 0.0, 1.0, 1.0])
    flat = np.concatenate([f[:n] for f, n in zip(features, counts)]).astype(np.float64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    padded = score_bags(features, counts, w[:, None]).best[:, 0]
    np.testing.assert_array_equal(bag_argmax(flat @ w, offsets) - offsets[:-1], padded)


def test_detections_are_the_first_survivors_of_suppression():
    features, counts, boxes = padded_bags(3, n=12, k=15)
    W = np.random.default_rng(4).normal(size=(6, 3))
    top = 5
    det = score_bags(features, counts, W, top=top, boxes=boxes, nms_threshold=0.3).detections
    got = list(zip(det.image.tolist(), det.cls.tolist(), det.box.tolist()))
    want = []
    for i, n in enumerate(counts):
        scores = features[i, :n].astype(np.float64) @ W
        for c in range(3):
            # suppression over all the image's boxes, then the survivors among its top best
            rank = np.empty(n, dtype=int)
            rank[np.argsort(-scores[:, c], kind="stable")] = np.arange(n)
            kept = nms(boxes[i, :n], scores[:, c], threshold=0.3)
            want += [(i, c, int(b)) for b in kept if rank[b] < top]
    assert got == want
    np.testing.assert_allclose(
        det.score, [features[i, b].astype(np.float64) @ W[:, c] for i, c, b in got], rtol=1e-12
    )


def test_flat_bags_score_as_padded_ones(monkeypatch):
    """Flat bags (image after image) give the padded bags' best boxes, rows and detections,
    also when they are padded a few images at a time."""
    features, counts, boxes = padded_bags(7, n=13, k=9, ties=True)
    W = np.random.default_rng(8).normal(size=(6, 4))
    valid = np.arange(9) < counts[:, None]
    ref = score_bags(features, counts, W, top=9, boxes=boxes, rows=True)
    for sub_block in (detection.SUB_BLOCK_BYTES, 9 * 6 * 8 * 3):  # one group; 3 images each
        monkeypatch.setattr(detection, "SUB_BLOCK_BYTES", sub_block)
        assert_same(
            ref, score_bags(features[valid], counts, W, top=9, boxes=boxes[valid], rows=True)
        )


@pytest.mark.parametrize("ties", [False, True])
def test_top_boxes_against_a_loop(ties):
    """The k best boxes (first among equal scores first), their rows and scores, the best
    score left out, the mean box and the spread around it; the bound they give holds for
    other weights; flat, padded and Dask bags agree."""
    da = pytest.importorskip("dask.array")
    features, counts, _ = padded_bags(9, n=17, k=9, ties=ties)
    rng = np.random.default_rng(10)
    w = rng.integers(-2, 3, 6).astype(float) if ties else rng.normal(size=6)
    for k in (1, 3, 9, 12):
        got = top_boxes(features, counts, w, k)
        for i, n in enumerate(counts):
            scores = features[i, :n].astype(np.float64) @ w
            order = sorted(range(n), key=lambda b: (-scores[b], b))
            kept = order[:k]
            assert got.index[i].tolist() == kept + [-1] * (k - len(kept))
            np.testing.assert_allclose(got.score[i, : len(kept)], scores[kept], rtol=1e-12)
            np.testing.assert_array_equal(got.rows[i, : len(kept)], features[i, kept])
            assert got.next_score[i] == pytest.approx(
                scores[order[k]] if n > k else -np.inf, rel=1e-12
            )
            boxes = features[i, :n].astype(np.float64)
            np.testing.assert_allclose(got.mean[i], boxes.mean(axis=0), rtol=1e-12)
            assert got.spread[i] == pytest.approx(
                np.linalg.norm(boxes - boxes.mean(axis=0), axis=1).max(), rel=1e-12
            )
            v = w + rng.normal(size=6)
            assert (
                boxes[order[k:]] @ v
                <= got.next_score[i]
                + got.mean[i] @ (v - w)
                + got.spread[i] * np.linalg.norm(v - w)
                + 1e-9
            ).all()
        assert (
            got.index[:, 0].tolist() == score_bags(features, counts, w[:, None]).best[:, 0].tolist()
        )
        valid = np.arange(9) < counts[:, None]
        for other in (
            top_boxes(features[valid], counts, w, k),
            top_boxes(da.from_array(features, chunks=(5, 9, 6)), counts, w, k),
        ):
            for x, y in zip(got, other):
                np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        top_boxes(features, counts, w, 0)
    with pytest.raises(ValueError, match="w must hold 6 finite weights"):
        top_boxes(features, counts, np.ones(5), 2)


def assert_same(a, b):
    for name in ("best", "score", "rows"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for x, y in zip(a.detections, b.detections):
        np.testing.assert_array_equal(x, y)


def test_numpy_dask_zarr_and_distributed_give_the_same_bits():
    da = pytest.importorskip("dask.array")
    features, counts, boxes = padded_bags(5, n=31, k=11, d=7, dtype=np.float16)
    W = np.random.default_rng(6).normal(size=(7, 20))
    options = {"top": 4, "boxes": boxes, "rows": True}
    ref = score_bags(features, counts, W, **options)
    assert ref.rows.dtype == np.float64
    for chunk in (1, 5, 31):
        lazy = da.from_array(features, chunks=(chunk, 11, 7))
        assert_same(ref, score_bags(lazy, counts, W, **options))
        assert_same(ref, score_bags(lazy, counts, W, scheduler="sync", **options))
    # chunks that split boxes or features are joined per block of images
    assert_same(ref, score_bags(da.from_array(features, chunks=(4, 5, 3)), counts, W, **options))
    zarr = pytest.importorskip("zarr")
    store = zarr.create_array(store={}, shape=features.shape, chunks=(6, 11, 7), dtype="float16")
    store[:] = features
    assert_same(ref, score_bags(store, counts, W, **options))
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        lazy = da.from_array(features, chunks=(5, 11, 7))
        assert_same(
            ref, score_bags(lazy, counts, W, scheduler=cluster.scheduler_address, **options)
        )
        with distributed.Client(cluster, set_as_default=False) as client:
            assert_same(ref, score_bags(lazy, counts, W, scheduler=client, **options))


def test_bad_input_is_named():
    features, counts, boxes = padded_bags(0)
    W = np.ones((6, 2))
    with pytest.raises(ValueError, match="3-D array"):
        score_bags(features[0, 0], counts, W)
    with pytest.raises(
        ValueError,
        match=r"counts must give at least one box per image and "
        r"sum to the 9 rows of the flat box features",
    ):
        score_bags(features[0], counts, W)
    with pytest.raises(ValueError, match=r"counts must lie in \[1, 9\]"):
        score_bags(features, np.where(counts == counts[0], 0, counts), W)
    with pytest.raises(ValueError, match="one box count per image"):
        score_bags(features, counts[:-1], W)
    with pytest.raises(ValueError, match=r"W must have shape \(6, n_classes\)"):
        score_bags(features, counts, np.ones(6))
    with pytest.raises(ValueError, match="detections need boxes"):
        score_bags(features, counts, W, top=3)
    with pytest.raises(ValueError, match="top must be a positive integer"):
        score_bags(features, counts, W, top=0, boxes=boxes)
    with pytest.raises(ValueError, match="floating point"):
        score_bags(features.astype(int), counts, W)
    bad = features.copy()
    bad[7, 0, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite values \\(images 0 to 22\\)"):
        score_bags(bad, counts, W)
    bad[7, counts[7] :] = np.nan  # padding is never read into a result
    bad[7, 0, 2] = 0.0
    np.testing.assert_array_equal(
        score_bags(bad, counts, W).best, score_bags(features, counts, W).best
    )
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match="scheduler must be None"):
        score_bags(da.from_array(features, chunks=(5, 9, 6)), counts, W, scheduler=3)


def test_top_boxes_builds_on_the_public_names_of_detection():
    """qs.top_boxes scores its blocks with the helpers qs.detection exports, none private."""
    from qs import top_boxes as module

    tree = ast.parse(inspect.getsource(module))
    names = [
        a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "qs.detection"
        for a in node.names
    ]
    assert names and all(n in detection.__all__ for n in names), names
    assert all(hasattr(detection, n) for n in detection.__all__)
