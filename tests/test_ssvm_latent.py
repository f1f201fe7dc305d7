"""Latent structured SVM on bags of boxes (qs.ssvm.latent) and the synthetic VOC2007-like bags
(qs.data.voc2007): best boxes, identical models across exact LAI methods, a non-increasing
outer objective, the objective against enumeration of every box choice, bad input."""

import itertools

import numpy as np
import pytest

from qs.data.voc2007 import CLASSES, make_voc2007_detection
from qs.inference import lai
from qs.metrics import box_iou
from qs.ssvm.latent import LatentProblem, bag_argmax, check_bags, latent_cutting_plane


def tiny_bags(seed, n_pos=4, n_neg=6, d=5):
    """Bags of 1-4 boxes; positives hold one box along a hidden direction."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 5, n_pos + n_neg)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    X = rng.normal(size=(offsets[-1], d))
    labels = np.repeat([1, 0], [n_pos, n_neg])
    for i in range(n_pos):
        X[offsets[i] + rng.integers(sizes[i]), 0] += 3.0
    return X, offsets, labels


def test_bag_argmax_takes_the_first_best_box():
    scores = np.array([1.0, 3.0, 3.0, -1.0, 0.5, 0.5, 2.0])
    offsets = np.array([0, 3, 4, 7])
    assert bag_argmax(scores, offsets).tolist() == [1, 3, 6]
    rng = np.random.default_rng(1)
    for _ in range(50):
        sizes = rng.integers(1, 6, rng.integers(1, 8))
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        scores = rng.integers(0, 3, offsets[-1]).astype(float)  # many ties
        loop = [a + int(np.argmax(scores[a:b])) for a, b in zip(offsets[:-1], offsets[1:])]
        assert bag_argmax(scores, offsets).tolist() == loop


@pytest.mark.parametrize(
    "loss, methods",
    [("ap", ["qs", "yue", "search", "sort_dc", "auto"]), ("ndcg", ["qs", "chakrabarti", "bucket"])],
)
def test_exact_methods_train_identical_models(loss, methods):
    X, offsets, labels = tiny_bags(0, n_pos=6, n_neg=14)
    results = [
        latent_cutting_plane(X, offsets, labels, C=10.0, loss=loss, method=m, max_outer=10)
        for m in methods
    ]
    for r in results[1:]:
        np.testing.assert_allclose(r.w, results[0].w, rtol=1e-9, atol=1e-12)
        assert r.pos_boxes.tolist() == results[0].pos_boxes.tolist()
        assert r.n_outer == results[0].n_outer


@pytest.mark.parametrize("seed", range(4))
def test_outer_objective_never_increases(seed):
    X, offsets, labels = tiny_bags(seed, n_pos=8, n_neg=20, d=8)
    C, tol = 50.0, 1e-4
    r = latent_cutting_plane(X, offsets, labels, C=C, tol=tol, max_outer=30, min_outer=3)
    assert r.n_outer >= 3
    assert (np.diff(r.objective) <= C * tol + 1e-9).all(), r.objective


def enumerated_objective(w, X, offsets, labels, C):
    """1/2|w|^2 + C max over negatives' boxes and rankings of the latent hinge, positives at
    their best boxes: every negative box choice enumerated, every ranking by brute force."""
    box_scores = X @ w
    bags = [range(a, b) for a, b in zip(offsets[:-1], offsets[1:])]
    pos_rows = [
        max(bag, key=lambda k: (box_scores[k], -k)) for bag, y in zip(bags, labels) if y == 1
    ]
    worst = -np.inf
    for neg_rows in itertools.product(*[bag for bag, y in zip(bags, labels) if y == 0]):
        scores = box_scores[np.array(pos_rows + list(neg_rows))]
        res = lai(scores, np.repeat([1, 0], [len(pos_rows), len(neg_rows)]), "ap", "brute")
        worst = max(worst, res.objective - res.ground_truth_F)
    return 0.5 * w @ w + C * worst


@pytest.mark.parametrize("seed", range(3))
def test_objective_equals_enumeration_of_box_choices(seed):
    X, offsets, labels = tiny_bags(seed, n_pos=3, n_neg=4, d=3)
    r = latent_cutting_plane(X, offsets, labels, C=5.0, max_outer=5)
    assert r.objective[-1] == pytest.approx(
        enumerated_objective(r.w, X, offsets, labels, 5.0), rel=1e-9, abs=1e-12
    )
    # and at weights the solver never saw
    w = np.random.default_rng(seed).normal(size=X.shape[1])
    prob = LatentProblem(
        X,
        offsets,
        labels,
        bag_argmax(X @ w, offsets)[labels == 1],
        C=5.0,
        loss="ap",
        method="qs",
        tol=1e-3,
        max_iter=10,
        callback=None,
    )
    _, _, xi = prob.most_violated(w)
    assert prob.primal(w, xi) == pytest.approx(
        enumerated_objective(w, X, offsets, labels, 5.0), rel=1e-9
    )


def test_initial_boxes_given_and_seeded():
    X, offsets, labels = tiny_bags(3)
    a = latent_cutting_plane(X, offsets, labels, C=1.0, max_outer=2, random_state=1)
    b = latent_cutting_plane(X, offsets, labels, C=1.0, max_outer=2, random_state=1)
    np.testing.assert_array_equal(a.w, b.w)
    given = latent_cutting_plane(
        X, offsets, labels, C=1.0, max_outer=2, init=np.zeros(4, dtype=int)
    )
    assert given.pos_boxes.shape == (4,)


def test_bad_input_is_named():
    X, offsets, labels = tiny_bags(0)
    with pytest.raises(ValueError, match="offsets must rise strictly from 0"):
        check_bags(X, np.array([0, 2, 2, offsets[-1]]))
    with pytest.raises(ValueError, match="offsets must rise strictly"):
        check_bags(X, offsets[:-1])
    with pytest.raises(ValueError, match="1-D integer array"):
        check_bags(X, offsets.astype(float))
    bad = X.copy()
    bad[-1, 0] = np.nan
    with pytest.raises(ValueError, match="box features hold NaN"):
        check_bags(bad, offsets)
    with pytest.raises(ValueError, match="2-D matrix"):
        check_bags(X[:, 0], offsets)
    with pytest.raises(ValueError, match="init must give one box index"):
        latent_cutting_plane(X, offsets, labels, init=np.full(4, 99))
    with pytest.raises(ValueError, match="init must be 'random'"):
        latent_cutting_plane(X, offsets, labels, init="binary-svm")
    with pytest.raises(ValueError, match="no positive"):
        latent_cutting_plane(X, offsets, np.zeros_like(labels))
    with pytest.raises(ValueError, match="max_outer must be an integer"):
        latent_cutting_plane(X, offsets, labels, max_outer=0)


def test_synthetic_bags_are_shaped_like_voc2007_and_seeded():
    data = make_voc2007_detection(0, scale=0.01, boxes_per_image=12, n_features=16)
    again = make_voc2007_detection(0, scale=0.01, boxes_per_image=12, n_features=16)
    for split, n in (("trainval", 50), ("test", 50)):
        d = data[split]
        assert d.n_images == n and d.X.shape == (12 * n, 16) and d.X.dtype == np.float32
        assert d.offsets[-1] == d.X.shape[0] and d.boxes.shape == (d.X.shape[0], 4)
        assert "synthetic" in d.source and "not the paper's data" in d.source
        np.testing.assert_array_equal(d.X, again[split].X)
        for cls in range(len(CLASSES)):  # every class has a positive image in each split
            assert d.image_labels(cls).sum() >= 1
    # the class signal sits on the boxes over its objects: along a class's direction, an
    # image's best box overlaps one of its objects of the class in most positive images
    d = data["trainval"]
    direction = np.zeros(16)
    rows = [
        k
        for i, (b, c, _) in enumerate(d.objects)
        if (c == 3).any()
        for k in range(d.offsets[i], d.offsets[i + 1])
        if box_iou(d.boxes[k], b[c == 3]).max() > 0.7
    ]
    direction = d.X[rows].mean(axis=0) - d.X.mean(axis=0)
    best = bag_argmax(d.X @ direction, d.offsets)
    hits = [
        box_iou(d.boxes[best[i]], b[c == 3]).max() >= 0.5
        for i, (b, c, _) in enumerate(d.objects)
        if (c == 3).any()
    ]
    assert np.mean(hits) > 0.7


def test_estimator_ranks_held_out_images_by_their_best_box():
    from qs.estimators import LatentRankSVM

    data = make_voc2007_detection(1, scale=0.01, boxes_per_image=10, n_features=12)
    train, test = data["trainval"], data["test"]
    cls = 4
    y, y_test = train.image_labels(cls), test.image_labels(cls)
    ap = LatentRankSVM(loss="ap", C=10.0, tol=1e-2, max_outer=5).fit(
        train.X, y, offsets=train.offsets
    )
    zero_one = LatentRankSVM(loss="01", C=10.0, tol=1e-2, max_outer=5).fit(
        train.X, y, offsets=train.offsets
    )
    chance = y_test.mean()
    for model in (ap, zero_one):
        assert model.coef_.shape == (12,) and model.lai_calls_ > 0
        image_scores = model.decision_function(test.X, offsets=test.offsets)
        best = [
            model.box_scores(test.X)[a:b].max() for a, b in zip(test.offsets[:-1], test.offsets[1:])
        ]
        np.testing.assert_allclose(image_scores, best)
    # 7 positives of 50 test images: across data seeds 1-6 this AP is 1.9x to 4.2x chance
    assert ap.score(test.X, y_test, offsets=test.offsets) > 1.5 * chance
    assert zero_one.intercept_ != 0.0
    with pytest.raises(ValueError, match="X has 11 features"):
        ap.box_scores(test.X[:, :11])


def padded(X, offsets, dtype=np.float64):
    """The flat bags padded: (n_images, K_max, d) with zero rows beyond each count."""
    sizes = np.diff(offsets)
    features = np.zeros((sizes.size, sizes.max(), X.shape[1]), dtype=dtype)
    for i, (a, n) in enumerate(zip(offsets[:-1], sizes)):
        features[i, :n] = X[a : a + n]
    return features, sizes


@pytest.mark.parametrize("loss, methods", [("ap", ["qs", "yue", "auto"]), ("01", ["zero_one"])])
def test_padded_and_dask_bags_train_the_flat_model(loss, methods):
    da = pytest.importorskip("dask.array")
    X, offsets, labels = tiny_bags(1, n_pos=6, n_neg=14)
    X = X.astype(np.float16).astype(np.float64)  # values a float16 store holds exactly
    features, counts = padded(X, offsets, np.float16)
    options = {"C": 10.0, "loss": loss, "max_outer": 10, "random_state": 2}
    flat = latent_cutting_plane(X, offsets, labels, method=methods[0], **options)
    for method in methods:
        for bags in (features, da.from_array(features, chunks=(3, -1, -1))):
            r = latent_cutting_plane(bags, counts, labels, method=method, **options)
            np.testing.assert_array_equal(r.w, flat.w)
            assert r.pos_boxes.tolist() == flat.pos_boxes.tolist()
            np.testing.assert_array_equal(r.objective, flat.objective)


@pytest.mark.parametrize("seed", range(2))
def test_outer_objective_never_increases_on_dask_bags(seed):
    da = pytest.importorskip("dask.array")
    X, offsets, labels = tiny_bags(seed, n_pos=8, n_neg=20, d=8)
    features, counts = padded(X, offsets)
    C, tol = 50.0, 1e-4
    r = latent_cutting_plane(
        da.from_array(features, chunks=(7, -1, -1)),
        counts,
        labels,
        C=C,
        tol=tol,
        max_outer=30,
        min_outer=3,
    )
    assert r.n_outer >= 3
    assert (np.diff(r.objective) <= C * tol + 1e-9).all(), r.objective
    flat = latent_cutting_plane(X, offsets, labels, C=C, tol=tol, max_outer=30, min_outer=3)
    np.testing.assert_array_equal(r.objective, flat.objective)


def test_padded_bags_on_a_distributed_cluster():
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    X, offsets, labels = tiny_bags(4, n_pos=5, n_neg=10)
    features, counts = padded(X, offsets)
    flat = latent_cutting_plane(X, offsets, labels, C=10.0, max_outer=4)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        r = latent_cutting_plane(
            da.from_array(features, chunks=(4, -1, -1)),
            counts,
            labels,
            C=10.0,
            max_outer=4,
            scheduler=cluster.scheduler_address,
        )
    np.testing.assert_array_equal(r.w, flat.w)


def test_estimator_on_padded_bags():
    from qs.estimators import LatentRankSVM

    data = make_voc2007_detection(1, scale=0.01, boxes_per_image=10, n_features=12)
    train, test = data["trainval"], data["test"]
    y, y_test = train.image_labels(4), test.image_labels(4)
    k = 10  # every synthetic image holds the same boxes: padding is a free reshape
    bags = train.X.reshape(-1, k, 12), np.full(train.n_images, k)
    test_bags = test.X.reshape(-1, k, 12), np.full(test.n_images, k)
    for loss in ("ap", "01"):
        model = LatentRankSVM(loss=loss, C=10.0, tol=1e-2, max_outer=5)
        flat = model.fit(train.X, y, offsets=train.offsets).coef_.copy()
        model.fit(bags[0], y, counts=bags[1])
        np.testing.assert_array_equal(model.coef_, flat)
        np.testing.assert_allclose(
            model.decision_function(test_bags[0], counts=test_bags[1]),
            model.decision_function(test.X, offsets=test.offsets),
            rtol=1e-12,
        )
        assert model.score(test_bags[0], y_test, counts=test_bags[1]) == pytest.approx(
            model.score(test.X, y_test, offsets=test.offsets)
        )
    with pytest.raises(ValueError, match="not both or neither"):
        model.fit(train.X, y)
    with pytest.raises(ValueError, match="X has 11 features"):
        model.decision_function(test_bags[0][:, :, :11], counts=test_bags[1])


def test_estimator_warns_when_the_objective_does_not_settle():
    from sklearn.exceptions import ConvergenceWarning

    from qs.estimators import LatentRankSVM

    train = make_voc2007_detection(1, scale=0.01, boxes_per_image=10, n_features=12)["trainval"]
    y = train.image_labels(4)
    with pytest.warns(ConvergenceWarning, match="within max_outer=1 outer steps"):
        model = LatentRankSVM(C=10.0, tol=1e-2, max_outer=1, min_outer=1).fit(
            train.X, y, offsets=train.offsets
        )
    assert not model.converged_


def wide_bags(seed, n_pos=6, n_neg=14, d=6, ties=False):
    """Bags of 1-12 boxes (more than a small working set holds); with ``ties``, small-integer
    features, so that many boxes tie."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 13, n_pos + n_neg)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    X = (
        rng.integers(-1, 2, (offsets[-1], d)).astype(float)
        if ties
        else rng.normal(size=(offsets[-1], d))
    )
    for i in range(n_pos):
        X[offsets[i] + rng.integers(sizes[i]), 0] += 3.0
    return X, offsets, np.repeat([1, 0], [n_pos, n_neg])


@pytest.mark.parametrize("loss, method", [("ap", "qs"), ("01", "zero_one")])
@pytest.mark.parametrize("ties", [False, True])
def test_working_set_trains_the_model_of_full_passes(loss, method, ties):
    """Exact: the weights, boxes and objectives of every pass scoring all boxes, from a
    working set of 1, 2 or 5 boxes per image, flat, padded and as Dask bags, with ties."""
    da = pytest.importorskip("dask.array")
    X, offsets, labels = wide_bags(3, ties=ties)
    features, counts = padded(X, offsets)
    options = {"C": 10.0, "loss": loss, "method": method, "max_outer": 8, "random_state": 1}
    if loss == "01":  # the bias feature, as the estimator appends it
        X, features = (
            np.hstack([X, np.ones((len(X), 1))]),
            np.concatenate([features, np.ones(features.shape[:2] + (1,))], axis=2),
        )
    full = latent_cutting_plane(X, offsets, labels, **options)
    assert full.passes == full.lai_calls  # one pass per LAI call and per objective check
    for k in (1, 2, 5):
        for bags, bounds in (
            (X, offsets),
            (features, counts),
            (da.from_array(features, chunks=(6, -1, -1)), counts),
        ):
            r = latent_cutting_plane(bags, bounds, labels, working_set=k, **options)
            np.testing.assert_array_equal(r.w, full.w)
            assert r.pos_boxes.tolist() == full.pos_boxes.tolist()
            np.testing.assert_array_equal(r.objective, full.objective)
            assert r.lai_calls == full.lai_calls and r.passes <= full.passes


def test_working_set_saves_passes_and_reports_them():
    """On bags larger than the working set, most LAI calls need no pass; the callback sees
    the passes made so far, and the last equals the result's."""
    X, offsets, labels = wide_bags(5, n_pos=15, n_neg=45, d=10)
    seen = []
    r = latent_cutting_plane(
        X,
        offsets,
        labels,
        C=10.0,
        max_outer=6,
        working_set=4,
        callback=lambda step, objective, passes: seen.append(passes),
    )
    assert r.passes < r.lai_calls / 2, (r.passes, r.lai_calls)
    assert seen == sorted(seen) and seen[-1] == r.passes and len(seen) == r.n_outer
    with pytest.raises(ValueError, match="working_set must be None or an integer >= 1"):
        latent_cutting_plane(X, offsets, labels, working_set=0)


def test_lai_callback_records_every_lai_call_of_the_latent_training():
    from qs.estimators import LatentRankSVM

    X, offsets, labels = tiny_bags(0)
    calls = []
    est = LatentRankSVM(
        loss="ap", C=10.0, lai_callback=lambda s, y: calls.append((s.copy(), y.copy()))
    ).fit(X, labels, offsets=offsets)
    assert len(calls) == est.lai_calls_ == est.lai_times_.size
    # one score per image (each negative at its best box), the image labels in order
    assert all(s.shape == labels.shape and (y == (labels == 1)).all() for s, y in calls)
    plain = LatentRankSVM(loss="ap", C=10.0).fit(X, labels, offsets=offsets)
    np.testing.assert_array_equal(est.coef_, plain.coef_)  # recording changes nothing
