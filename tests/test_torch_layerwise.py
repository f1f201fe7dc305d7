"""qs.torch.layerwise: the layer-wise proximal structured SVM by block-coordinate Frank-Wolfe,
checked against its objective computed here from the fixed activation pattern."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.nn.utils import parameters_to_vector

from qs.nets import PLCNN
from qs.torch import rank_hinge_loss
from qs.torch.layerwise import layerwise_svm

N_CLASSES = 3
C, PROXIMAL = 1.0, 1e-3  # small enough a step that the most violated rankings change


def _hinge(scores, y):
    """The AP structured hinge of the one-vs-rest rankings of a mini-batch."""
    onehot = torch.nn.functional.one_hot(y, N_CLASSES).T.contiguous()
    return rank_hinge_loss(scores.T, onehot, loss="ap", method="qs", dim=-1)


@pytest.fixture
def problem():
    """A tiny PL-CNN (float64, batch norm in eval mode) and 3 mini-batches of 6 images; one
    torch thread (tiny tensors on shared cores run far slower on more)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = PLCNN((4, 4, 4), n_classes=N_CLASSES).double().eval()
    x = torch.randn(18, 3, 32, 32, dtype=torch.float64)
    y = torch.arange(18) % N_CLASSES
    batches = [(x[6 * i : 6 * i + 6], y[6 * i : 6 * i + 6]) for i in range(3)]
    yield model, batches
    torch.set_num_threads(threads)


def _objective(model, layer, theta0, patterns, batches):
    """proximal/2 |u|^2 + C mean_b H_b(theta0 + u) at the layer's current weights, the
    patterns those of theta0."""
    u = parameters_to_vector([layer.weight, layer.bias]).detach() - theta0
    with torch.no_grad():
        hinges = [
            _hinge(model.forward_fixed(x, p), y).item() for (x, y), p in zip(batches, patterns)
        ]
    return PROXIMAL / 2 * float(u @ u) + C * float(np.mean(hinges))


def _solve(model, layer, batches, passes, seed=0):
    return layerwise_svm(
        model,
        layer,
        _hinge,
        batches.__getitem__,
        len(batches),
        C=C,
        proximal=PROXIMAL,
        passes=passes,
        random_state=seed,
    )


@pytest.mark.parametrize("which", [-1, 2])  # the classifier, a convolution
def test_reduces_the_objective_and_closes_the_duality_gap(problem, which):
    model, batches = problem
    layer = model.linear_layers()[which]
    theta0 = parameters_to_vector([layer.weight, layer.bias]).detach().clone()
    patterns = [model.patterns(x) for x, _ in batches]
    start = _objective(model, layer, theta0, patterns, batches)
    gaps = []
    for passes in (1, 10):
        torch.nn.utils.vector_to_parameters(theta0, [layer.weight, layer.bias])
        result = _solve(model, layer, batches, passes)
        primal = _objective(model, layer, theta0, patterns, batches)
        assert result.steps == passes * len(batches)
        assert result.dual <= primal + 1e-9  # weak duality
        assert primal < start
        gaps.append(primal - result.dual)
    assert 0 < gaps[1] < 0.01 * gaps[0]


def test_changes_only_its_layer_and_is_seeded(problem):
    model, batches = problem
    layer = model.linear_layers()[-1]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    first = _solve(model, layer, batches, passes=2, seed=3)
    after = {k: v.clone() for k, v in model.state_dict().items()}
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {"classifier.weight", "classifier.bias"}
    model.load_state_dict(before)
    again = _solve(model, layer, batches, passes=2, seed=3)
    assert again == first
    assert all(torch.equal(v, after[k]) for k, v in model.state_dict().items())


def test_mean_hinge_is_the_mean_of_the_visited_hinges(problem):
    model, batches = problem
    seen = []
    result = layerwise_svm(
        model,
        model.linear_layers()[-1],
        _hinge,
        batches.__getitem__,
        len(batches),
        C=C,
        proximal=PROXIMAL,
        passes=2,
        callback=seen.append,
    )
    assert len(seen) == result.steps == 6
    assert result.mean_hinge == pytest.approx(np.mean(seen), rel=1e-12)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"C": 0.0}, "C and proximal must be > 0"),
        ({"proximal": -1.0}, "C and proximal must be > 0"),
        ({"passes": 0}, "passes must be a positive integer"),
        ({"n_batches": 0}, "n_batches must be a positive integer"),
    ],
)
def test_bad_arguments(problem, kwargs, match):
    model, batches = problem
    args = {"C": C, "proximal": PROXIMAL, "passes": 1, "n_batches": len(batches), **kwargs}
    n_batches = args.pop("n_batches")
    with pytest.raises(ValueError, match=match):
        layerwise_svm(
            model, model.linear_layers()[-1], _hinge, batches.__getitem__, n_batches, **args
        )
