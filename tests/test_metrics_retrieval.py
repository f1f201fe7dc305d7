"""Retrieval metrics of qs.metrics (mAP@R, Recall@k) against the loops of tests/naive.py and
pytorch-metric-learning's AccuracyCalculator, ties and bad input."""

import importlib.util

import numpy as np
import pytest

from qs.metrics import mean_average_precision_at_r, recall_at_k
from tests import naive


def _sample(seed, n=40, d=4, classes=5):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.integers(0, classes, n)


@pytest.mark.parametrize("seed", range(5))
def test_against_the_loops(seed):
    X, y = _sample(seed)
    y[0] = 99  # a query alone of its class: left out, yet a negative of every other
    assert mean_average_precision_at_r(X, y) == pytest.approx(
        naive.map_at_r(X.tolist(), y), rel=1e-12
    )
    for k in (1, 4, 10):
        assert recall_at_k(X, y, k) == pytest.approx(naive.recall_at_k(X.tolist(), y, k), rel=1e-12)


def test_ties_keep_the_input_order():
    base = np.random.default_rng(7).normal(size=(6, 3))
    X = np.repeat(base, 3, axis=0)  # every embedding three times: similarities tie
    y = np.array([0, 1, 2, 0, 1, 1, 2, 2, 0, 1, 0, 2, 0, 0, 1, 2, 1, 0])
    assert mean_average_precision_at_r(X, y) == pytest.approx(
        naive.map_at_r(X.tolist(), y), rel=1e-12
    )
    assert recall_at_k(X, y, 1) == pytest.approx(naive.recall_at_k(X.tolist(), y, 1))


def test_perfect_and_scale_invariant():
    y = np.repeat(np.arange(4), 5)
    X = np.eye(4)[y] + 0.01 * np.random.default_rng(0).normal(size=(20, 4))
    assert mean_average_precision_at_r(X, y) == 1.0
    assert recall_at_k(X, y, 1) == 1.0
    scaled = X * np.random.default_rng(1).uniform(0.1, 10, size=(20, 1))
    assert mean_average_precision_at_r(scaled, y) == mean_average_precision_at_r(X, y)


@pytest.mark.skipif(
    importlib.util.find_spec("pytorch_metric_learning") is None,
    reason="pytorch-metric-learning not installed (the [compare] extra)",
)
@pytest.mark.parametrize("seed", range(3))
def test_against_pytorch_metric_learning(seed):
    import torch
    from pytorch_metric_learning.distances import CosineSimilarity
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import CustomKNN

    X, y = _sample(10 + seed, n=60, d=5, classes=6)
    calc = AccuracyCalculator(
        include=("mean_average_precision_at_r", "precision_at_1"),
        device=torch.device("cpu"),
        knn_func=CustomKNN(CosineSimilarity()),
    )
    theirs = calc.get_accuracy(torch.tensor(X), torch.tensor(y))
    assert mean_average_precision_at_r(X, y) == pytest.approx(
        theirs["mean_average_precision_at_r"], rel=1e-6
    )
    assert recall_at_k(X, y, 1) == pytest.approx(theirs["precision_at_1"], rel=1e-6)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: mean_average_precision_at_r(np.zeros((3, 2)), [0, 1]), "one label each"),
        (lambda: mean_average_precision_at_r(np.zeros(3), [0, 1, 1]), "2-D"),
        (lambda: mean_average_precision_at_r(np.ones((1, 2)), [0]), "at least 2 samples"),
        (lambda: mean_average_precision_at_r([[1.0, np.nan], [1.0, 0.0]], [0, 0]), "finite"),
        (
            lambda: mean_average_precision_at_r(np.eye(3), [0, 1, 2]),
            "no class has two samples; mAP@R is undefined",
        ),
        (
            lambda: recall_at_k(np.eye(3), [0, 1, 2], 1),
            "no class has two samples; recall@k is undefined",
        ),
        (lambda: recall_at_k(np.eye(3), [0, 0, 1], 0), "k must be a positive integer"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
