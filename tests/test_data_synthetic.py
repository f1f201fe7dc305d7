"""qs.data.synthetic: the seeded synthetic data shaped like the VOC2011 action poselet
features: shapes and counts, seeding, and a task that is learnable but not trivial."""

import numpy as np
import pytest
from sklearn.linear_model import RidgeClassifier

from qs.data import ACTIONS, make_voc2011_actions
from qs.metrics import voc_average_precision

# --- synthetic VOC2011-shaped data -----------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic():
    return make_voc2011_actions(seed=3)


def test_synthetic_shapes_and_counts(synthetic):
    data = synthetic
    trainval, test = data["trainval"], data["test"]
    assert trainval.X.shape == (3347, 2405) and test.X.shape == (3363, 2405)
    assert trainval.positives_per_class()["phoning"] == 227
    for split in (trainval, test):
        counts = split.positives_per_class()
        assert list(counts) == list(ACTIONS) and all(150 <= c <= 400 for c in counts.values())
        assert (split.labels == 0).sum() > 0 and (split.labels == -1).sum() > 0
        X = split.X
        assert X.min() >= 0 and np.all(X[:, -1].toarray() == 1.0)
        assert 0.01 < X.nnz / np.prod(X.shape) < 0.1  # sparse
        assert split.source == "synthetic (seed 3), not the VOC2011 data"
        assert split.n_images < X.shape[0] and split.box_ids.min() == 1


def test_synthetic_is_seeded(synthetic):
    data = synthetic
    again = make_voc2011_actions(seed=3)
    other = make_voc2011_actions(seed=4, bias=False)
    assert (again["test"].X != data["test"].X).nnz == 0
    np.testing.assert_array_equal(again["trainval"].labels, data["trainval"].labels)
    assert other["test"].X.shape == (3363, 2404)
    assert not np.array_equal(other["trainval"].labels, data["trainval"].labels)


@pytest.mark.parametrize("action", ["phoning", "ridinghorse", "walking"])
def test_synthetic_is_learnable_but_not_trivial(synthetic, action):
    trainval, test = synthetic["trainval"], synthetic["test"]
    y, ignore = trainval.targets(action)
    model = RidgeClassifier(alpha=10.0, fit_intercept=False).fit(trainval.X[~ignore], y[~ignore])
    y_test, ignore_test = test.targets(action)
    ap = voc_average_precision(y_test, model.decision_function(test.X), ignore=ignore_test)
    chance = y_test[~ignore_test].mean()
    assert 3 * chance < ap < 0.95
