"""qs.torch.dlm: the inferences of direct loss minimization against exhaustive enumeration."""

import itertools

import numpy as np
import pytest

from tests import naive

torch = pytest.importorskip("torch")
from qs.torch import rank_hinge_loss
from qs.torch.dlm import DirectLoss, direct_coefficients, direct_loss

torch.set_num_threads(1)
METRIC = {"ap": naive.average_precision_of_order, "ndcg": naive.ndcg_of_order}


def coef_of_order(order, labels):
    """dF/ds of the ranking ``order``: at a positive (negatives below - above) / (PN), at a
    negative (positives below - above) / (PN)."""
    labels = np.asarray(labels, dtype=bool)
    p, m = labels.sum(), (~labels).sum()
    coef = np.zeros(len(order))
    for place, k in enumerate(order):
        others = [labels[o] != labels[k] for o in order]
        above = sum(others[:place])
        below = sum(others[place + 1 :])
        coef[k] = (below - above) / (p * m)
    return coef


def optima(scores, labels, loss, weight):
    """(best value, coefficient vectors of every ranking reaching it) of F + weight Delta,
    and the same of F alone's maximisers ranked by Delta (for R_w)."""
    values = []
    for order in itertools.permutations(range(len(scores))):
        delta = 1.0 - METRIC[loss]([bool(labels[k]) for k in order])
        values.append((naive.score_term(order, scores, labels), delta, order))
    objective = [f + weight * d for f, d, _ in values]
    best = max(objective)
    tol = 1e-12 * (1 + abs(best))
    return (
        best,
        [coef_of_order(o, labels) for (_, _, o), v in zip(values, objective) if v >= best - tol],
        values,
    )


def small_cases(seed, count=12):
    rng = np.random.default_rng(seed)
    for case in range(count):
        n = 3 + case % 4
        ties = case % 2 == 1
        scores = rng.integers(0, 3, n).astype(float) if ties else rng.normal(size=n)
        labels = np.r_[True, False, rng.random(n - 2) < 0.5]
        rng.shuffle(labels)
        yield scores, labels


@pytest.mark.parametrize("method", ["auto", "dp"])
@pytest.mark.parametrize("update", ["positive", "negative"])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_direct_ranking_is_an_optimum_of_all_orderings(loss, update, method):
    """R_direct is among the maximisers of F +- eps Delta; R_w among those of F, with the
    least Delta among them (the tie rule); ties included (eps a power of 2: s / eps exact)."""
    sign = 1.0 if update == "positive" else -1.0
    for scores, labels in small_cases(1):
        for eps in (0.25, 1.0, 4.0):
            coef_w, coef_d, delta = direct_coefficients(
                scores[None], labels[None], loss, eps, update, method
            )
            _, argmax, values = optima(scores, labels, loss, sign * eps)
            assert any(np.allclose(coef_d[0], c, rtol=0, atol=1e-12) for c in argmax)
            top = max(f for f, _, _ in values)
            predicted = [(d, o) for f, d, o in values if f >= top - 1e-12]
            least = min(d for d, _ in predicted)
            assert delta[0] == pytest.approx(least, rel=1e-12, abs=1e-15)
            assert any(
                np.allclose(coef_w[0], coef_of_order(o, labels), rtol=0, atol=1e-12)
                for d, o in predicted
                if d <= least + 1e-12
            )


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_positive_update_by_inference_equals_the_programme(loss):
    rng = np.random.default_rng(2)
    scores = rng.normal(size=(5, 300))
    labels = rng.random((5, 300)) < 0.2
    labels[0] = False
    for eps in (0.01, 0.3, 5.0):
        by_lai = direct_coefficients(scores, labels, loss, eps, "positive", "auto")
        by_dp = direct_coefficients(scores, labels, loss, eps, "positive", "dp")
        for a, b in zip(by_lai, by_dp):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("update", ["positive", "negative"])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_loss_is_delta_of_the_scores_order_and_backward_is_the_difference(loss, update):
    rng = np.random.default_rng(3)
    scores = torch.from_numpy(rng.normal(size=(4, 60)))
    labels = torch.from_numpy(rng.random((4, 60)) < 0.3)
    labels[1] = True
    eps = 0.2
    x = scores.clone().requires_grad_(True)
    value = direct_loss(x, labels, loss, eps=eps, update=update, reduction="sum", dim=-1)
    value.backward()
    order = [np.argsort(-s, kind="stable") for s in scores.numpy()]
    metric = [METRIC[loss](list(y[o])) for y, o in zip(labels.numpy(), order)]
    expected = sum(1.0 - m for q, m in enumerate(metric) if q != 1)
    assert value.item() == pytest.approx(expected, rel=1e-12)
    coef_w, coef_d, _ = direct_coefficients(scores.numpy(), labels.numpy(), loss, eps, update)
    diff = (coef_d - coef_w) / eps if update == "positive" else (coef_w - coef_d) / eps
    np.testing.assert_array_equal(x.grad.numpy(), diff)
    assert not x.grad[1].any() and x.grad[0].abs().sum() > 0
    mean = direct_loss(scores, labels, loss, eps=eps, update=update, dim=-1)
    assert mean.item() == pytest.approx(expected / 3, rel=1e-12)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_large_eps_limits_make_the_hinge_subgradient(loss):
    """The positive update at eps = 1 solves the hinge's inference (R+ = R_bar), and for eps
    large the negative update's eps * gradient is coef(R_w) - coef(R*) (R- reaches the
    ground truth): their sum is the hinge subgradient coef(R_bar) - coef(R*)."""
    rng = np.random.default_rng(4)
    scores = torch.from_numpy(rng.normal(size=(3, 7)))
    labels = torch.from_numpy(rng.random((3, 7)) < 0.4)
    labels[:, 0], labels[:, 1] = True, False
    x = scores.clone().requires_grad_(True)
    rank_hinge_loss(x, labels, loss, reduction="sum", dim=-1).backward()
    y = scores.clone().requires_grad_(True)
    direct_loss(y, labels, loss, eps=1.0, update="positive", reduction="sum", dim=-1).backward()
    for eps in (1e6, 1e9):
        z = scores.clone().requires_grad_(True)
        direct_loss(z, labels, loss, eps=eps, update="negative", reduction="sum", dim=-1).backward()
        torch.testing.assert_close(y.grad + eps * z.grad, x.grad, rtol=0, atol=1e-12)


def test_mask_and_module():
    rng = np.random.default_rng(5)
    scores = torch.from_numpy(rng.normal(size=(3, 20)))
    labels = torch.from_numpy(rng.random((3, 20)) < 0.3)
    mask = torch.from_numpy(rng.random((3, 20)) < 0.3)
    module = DirectLoss("ndcg", eps=0.5, update="negative", reduction="none", dim=-1)
    assert "negative" in repr(module)
    x = scores.clone().requires_grad_(True)
    values = module(x, labels, mask)
    values.sum().backward()
    for q in range(3):
        keep = ~mask[q]
        xq = scores[q, keep].clone().requires_grad_(True)
        vq = direct_loss(
            xq, labels[q, keep], "ndcg", eps=0.5, update="negative", reduction="none", dim=-1
        )
        vq.backward()
        assert vq.item() == values[q].item()
        torch.testing.assert_close(x.grad[q, keep], xq.grad, rtol=0, atol=0)
    assert not x.grad[mask].any()


@pytest.mark.parametrize("method", ["auto", "dp"])
@pytest.mark.parametrize("update", ["positive", "negative"])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_float32_scores_give_the_float64_gradient_rounded_once(loss, update, method):
    """float32 scores are read in place, solved as their float64 copy and answered in
    float32: the loss and every gradient entry are the float64 path's rounded once; ties
    (scores on a grid of 1/4) included (the negative update always runs the programme)."""
    rng = np.random.default_rng(7)
    scores = np.round(rng.normal(size=(4, 80)) * 4) / 4 + 1000.0
    scores[1] = rng.normal(size=80) * 1e-3 + 3.0
    scores[2] = rng.normal(size=80)  # differences that float32 would round
    labels = torch.from_numpy(rng.random((4, 80)) < 0.3)
    low = torch.from_numpy(scores.astype(np.float32)).requires_grad_(True)
    value = direct_loss(
        low, labels, loss, eps=0.05, update=update, method=method, reduction="none", dim=-1
    )
    value.sum().backward()
    wide = low.detach().double().requires_grad_(True)
    ref = direct_loss(
        wide, labels, loss, eps=0.05, update=update, method=method, reduction="none", dim=-1
    )
    ref.sum().backward()
    assert low.grad.dtype == torch.float32 and wide.grad.abs().sum() > 0
    torch.testing.assert_close(value, ref.float(), rtol=0, atol=0)
    torch.testing.assert_close(low.grad, wide.grad.float(), rtol=0, atol=0)


def test_half_precision_scores_come_back_in_their_dtype():
    rng = np.random.default_rng(6)
    scores = torch.from_numpy(rng.normal(size=(2, 50)))
    labels = torch.from_numpy(rng.random((2, 50)) < 0.3)
    for dtype in (torch.float16, torch.bfloat16):
        x = scores.to(dtype).requires_grad_(True)
        value = direct_loss(x, labels, eps=0.1, dim=-1)
        value.backward()
        assert value.dtype == dtype and x.grad.dtype == dtype
        ref = direct_loss(x.detach().double(), labels, eps=0.1, dim=-1)
        assert value.item() == pytest.approx(ref.item(), rel=1e-2)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"eps": 0.0}, "eps must be a finite number > 0"),
        ({"eps": -1.0}, "eps must be a finite number > 0"),
        ({"eps": float("nan")}, "eps must be a finite number > 0"),
        ({"eps": float("inf")}, "eps must be a finite number > 0"),
        ({"eps": True}, "eps must be a finite number > 0"),
        ({"eps": 1e-320}, "too small for these scores"),
        ({"eps": 1.0, "update": "both"}, "update must be one of"),
        ({"eps": 1.0, "loss": "01"}, "'ap' or 'ndcg'"),
        ({"eps": 1.0, "method": "torch"}, "method 'torch'"),
        ({"eps": 1.0, "method": "bogus"}, "Unknown method"),
        ({"eps": 1.0, "labels": torch.tensor([[1, 0]])}, "same shape"),
    ],
)
def test_bad_input_is_refused(kwargs, message):
    args = {
        "scores": torch.tensor([[0.0, 1.0, 2e10]], dtype=torch.float64),
        "labels": torch.tensor([[1, 0, 1]]),
        "dim": -1,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        direct_loss(**args)


@pytest.mark.parametrize("update", ["positive", "negative"])
def test_batch_logits_rank_along_dim_0(update):
    """(N, C) scores with the default dim: one query per column, the transposed call with
    dim=-1; the module takes dim too."""
    rng = np.random.default_rng(23)
    scores = torch.from_numpy(rng.normal(size=(40, 3)))
    labels = torch.from_numpy(rng.random((40, 3)) < 0.3)
    x = scores.clone().requires_grad_(True)
    value = direct_loss(x, labels, "ap", eps=0.2, update=update, reduction="none")
    value.sum().backward()
    t = scores.T.clone().requires_grad_(True)
    ref = direct_loss(t, labels.T, "ap", eps=0.2, update=update, reduction="none", dim=-1)
    ref.sum().backward()
    assert value.shape == (3,)
    torch.testing.assert_close(value, ref, rtol=0, atol=0)
    torch.testing.assert_close(x.grad, t.grad.T, rtol=0, atol=0)
    module = DirectLoss("ap", eps=0.2, update=update, reduction="none", dim=-1)
    torch.testing.assert_close(module(scores.T, labels.T), ref.detach(), rtol=0, atol=0)
