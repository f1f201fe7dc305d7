"""Global objectives (Eban et al., AISTATS 2017): the tp/fp bounds, the Lagrangians, the reversed
multiplier gradients, and a constraint met after training."""

import math

import pytest

torch = pytest.importorskip("torch")

from qs.surrogates.global_objectives import (
    SURROGATES,
    AUCPRLoss,
    FBetaLoss,
    PrecisionAtRecallLoss,
    RecallAtPrecisionLoss,
    ROCAUCLoss,
    false_positives_upper_bound,
    true_positives_lower_bound,
)

ALL = {
    "recall_at_precision": lambda q: RecallAtPrecisionLoss(0.8, num_labels=q),
    "precision_at_recall": lambda q: PrecisionAtRecallLoss(0.7, num_labels=q),
    "aucpr": lambda q: AUCPRLoss(num_labels=q, num_anchors=5),
    "roc_auc": lambda q: ROCAUCLoss(num_labels=q, num_anchors=4),
    "f_beta": lambda q: FBetaLoss(2.0, num_labels=q),
}


def _random(q=3, n=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(q, n, generator=g, dtype=torch.float64) * 2
    labels = torch.rand(q, n, generator=g) < 0.3
    labels[:, 0], labels[:, 1] = True, False
    return scores, labels


@pytest.mark.parametrize("surrogate", SURROGATES)
def test_bounds_hold_on_random_data(surrogate):
    for seed in range(20):
        scores, labels = _random(seed=seed)
        # thresholds at sample scores too, where the indicator is exactly at its edge
        for b in (-1.5, 0.0, 0.7, float(scores[0, 3]), float(scores[0, 0])):
            hit = scores >= b
            tp = (hit & labels).sum(-1).double()
            fp = (hit & ~labels).sum(-1).double()
            assert (true_positives_lower_bound(scores, labels, b, surrogate) <= tp + 1e-12).all()
            assert (false_positives_upper_bound(scores, labels, b, surrogate) >= fp - 1e-12).all()


def test_hinge_bounds_by_hand():
    scores = torch.tensor([3.0, 2.5, -4.0, 5.0, -2.0, -1.5], dtype=torch.float64)
    labels = torch.tensor([1, 1, 1, 0, 0, 0])
    # b = 0.5: positives' hinges 0, 0, 5.5; negatives' 5.5, 0, 0
    assert true_positives_lower_bound(scores, labels, 0.5).item() == pytest.approx(3 - 5.5)
    assert false_positives_upper_bound(scores, labels, 0.5).item() == pytest.approx(5.5)
    # every margin >= 1: the bounds are the counts
    assert true_positives_lower_bound(scores[:2], labels[:2], 1.5).item() == 2.0
    assert false_positives_upper_bound(scores[4:], labels[4:], 0.0).item() == 0.0


def test_xent_bound_is_exact_at_the_threshold():
    # log(1 + e^0) / log 2 = 1: the bound touches the indicator where the score is the threshold
    scores, labels = torch.tensor([0.0, 0.0]), torch.tensor([1, 0])
    assert true_positives_lower_bound(scores, labels, 0.0, "xent").item() == pytest.approx(0.0)
    assert false_positives_upper_bound(scores, labels, 0.0, "xent").item() == pytest.approx(1.0)


def test_recall_at_precision_is_the_papers_lagrangian():
    scores, labels = _random(q=2, n=40, seed=3)
    loss = RecallAtPrecisionLoss([0.8, 0.6], num_labels=2, surrogate="hinge").double()
    with torch.no_grad():
        loss.thresholds.copy_(torch.tensor([[0.3], [-0.2]], dtype=torch.float64))
        loss.multipliers.copy_(torch.tensor([[1.5], [-0.5]], dtype=torch.float64))  # |v|
    want = 0.0
    for q, (alpha, lam, b) in enumerate(((0.8, 1.5, 0.3), (0.6, 0.5, -0.2))):
        s, y = scores[q], labels[q]
        l_pos = torch.clamp(1 - (s - b), min=0)[y].sum()
        l_neg = torch.clamp(1 + (s - b), min=0)[~y].sum()
        n_pos = int(y.sum())
        lagrangian = (
            (1 + (1 - alpha) * lam) * l_pos + lam * alpha * l_neg - lam * (1 - alpha) * n_pos
        )  # eq. 5
        want += lagrangian / len(s)
    assert loss(scores, labels).item() == pytest.approx(want.item() / 2, rel=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_multipliers_get_the_reversed_gradient_scaled_by_the_dual_rate(name, monkeypatch):
    scores, labels = _random(q=2, n=60, seed=1)
    loss = ALL[name](2).double()
    with torch.no_grad():
        loss.thresholds.uniform_(-0.5, 0.5)
        loss.multipliers.uniform_(0.2, 2.0)
    # the true gradient: the same Lagrangian with lambda = |v| and no reversal
    with monkeypatch.context() as m:
        m.setattr(loss, "lambdas", lambda: loss.multipliers.abs())
        true_lam, true_b = torch.autograd.grad(
            loss(scores, labels), [loss.multipliers, loss.thresholds]
        )
    got_lam, got_b = torch.autograd.grad(loss(scores, labels), [loss.multipliers, loss.thresholds])
    assert true_lam.abs().max() > 1e-6
    torch.testing.assert_close(got_lam, -loss.dual_rate_factor * true_lam)
    torch.testing.assert_close(got_b, true_b)  # thresholds: plain descent
    # descent on the loss is ascent on the Lagrangian for the multipliers
    step = torch.optim.SGD([loss.multipliers], lr=0.1)
    before = loss.multipliers.detach().clone()
    step.zero_grad()
    loss(scores, labels).backward()
    step.step()
    change = loss.multipliers.detach() - before
    torch.testing.assert_close(change, 0.1 * loss.dual_rate_factor * true_lam)


def test_recall_at_precision_multiplier_gradient_is_the_constraint():
    scores, labels = _random(q=1, n=80, seed=4)
    loss = RecallAtPrecisionLoss(0.9, surrogate="hinge").double()
    loss(scores, labels).backward()
    s, y = scores[0], labels[0]
    psi = (
        0.1 * torch.clamp(1 - s, min=0)[y].sum()
        + 0.9 * torch.clamp(1 + s, min=0)[~y].sum()
        - 0.1 * y.sum()
    ) / len(s)  # the precision constraint psi <= 0, per sample
    assert loss.multipliers.grad.item() == pytest.approx(-0.1 * psi.item(), rel=1e-12)


def test_f_beta_saddle_value_is_the_bound():
    scores, labels = _random(q=1, n=50, seed=2)
    scores = scores + 3 * labels  # tp_l > 0
    beta = 2.0
    loss = FBetaLoss(beta, surrogate="hinge").double()
    tp = true_positives_lower_bound(scores, labels).item() / 50
    fp = false_positives_upper_bound(scores, labels).item() / 50
    prior = labels.double().mean().item()
    f_bound = (1 + beta**2) * tp / (beta**2 * prior + tp + fp)
    with torch.no_grad():
        loss.scale.fill_(1 / tp)
        loss.multipliers.fill_((1 + beta**2) / f_bound)
    value = loss(scores, labels)
    assert value.item() == pytest.approx((1 + beta**2) / f_bound, rel=1e-10)
    g_scale, g_lam = torch.autograd.grad(value, [loss.scale, loss.multipliers])
    assert abs(g_scale.item()) < 1e-10 and abs(g_lam.item()) < 1e-10  # a stationary point


def test_aucpr_anchors_follow_the_released_defaults():
    loss = AUCPRLoss()
    assert loss.thresholds.shape == (1, 20) and loss.multipliers.shape == (1, 20)
    torch.testing.assert_close(loss.anchors, torch.arange(1, 21, dtype=torch.float64) / 21)
    assert loss.dual_rate_factor == 0.1 and loss.surrogate == "xent"
    assert torch.all(loss.multipliers == 1) and torch.all(loss.thresholds == 0)


def test_recall_at_precision_training_meets_the_constraint():
    """Separable toy data, 20% positives; from all-zero scores (precision = 0.2) the
    trained rule f >= b reaches the target precision 0.9 on the training data."""
    g = torch.Generator().manual_seed(0)
    n_pos, n_neg = 60, 240
    x = torch.cat(
        [
            torch.randn(n_pos, 2, generator=g) * 0.5 + torch.tensor([1.5, 1.0]),
            torch.randn(n_neg, 2, generator=g) * 0.5 - torch.tensor([1.5, 1.0]),
        ]
    )
    y = torch.cat([torch.ones(n_pos, dtype=torch.bool), torch.zeros(n_neg, dtype=torch.bool)])
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    loss = RecallAtPrecisionLoss(0.9, surrogate="hinge")
    opt = torch.optim.SGD([*model.parameters(), *loss.parameters()], lr=0.1)
    before = loss.multipliers.item()
    for _ in range(300):
        opt.zero_grad()
        loss(model(x)[:, 0], y).backward()
        opt.step()
    decided = loss.decide(model(x)[:, 0].detach())[0, :, 0]
    tp, fp = (decided & y).sum().item(), (decided & ~y).sum().item()
    assert tp / max(tp + fp, 1) >= 0.9
    assert tp / n_pos >= 0.9
    assert loss.multipliers.abs().item() != before  # the multiplier moved


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: AUCPRLoss(surrogate="logistic"), "surrogate must be one of"),
        (lambda: AUCPRLoss(num_anchors=0), "num_anchors must be an integer >= 1"),
        (lambda: AUCPRLoss(precision_range=(0.5, 0.2)), "precision_range must satisfy"),
        (lambda: RecallAtPrecisionLoss(1.5), "target_precision must be a number in"),
        (lambda: RecallAtPrecisionLoss(0.5, dual_rate_factor=0), "dual_rate_factor must be"),
        (lambda: FBetaLoss(-1.0), "beta must be"),
    ],
)
def test_bad_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_inputs():
    loss = AUCPRLoss(num_labels=2)
    with pytest.raises(ValueError, match="built for 2 queries"):
        loss(torch.randn(3, 5), torch.ones(3, 5))
    with pytest.raises(ValueError, match="same shape"):
        loss(torch.randn(2, 5), torch.ones(2, 4))
    with pytest.raises(ValueError, match="binary"):
        loss(torch.randn(2, 5), torch.full((2, 5), 2))
    with pytest.raises(ValueError, match="finite"):
        loss(torch.full((2, 5), math.nan), torch.ones(2, 5))
