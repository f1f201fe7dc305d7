"""SoDeep's losses (qs.surrogates.sodeep.losses): with exact ranks they are 1 - AP
(scikit-learn) and 1 - Spearman (scipy); with the shipped sorter near them and
differentiable; reductions; and bad input."""

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score

torch = pytest.importorskip("torch")
from qs.surrogates.sodeep import (
    DEFAULT_LENGTH,
    exact_ranks,
    load_sorter,
    sodeep_ap_loss,
    sodeep_spearman_loss,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def shipped():
    return load_sorter()


def random_queries(seed, q, n, frac=0.3):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(q, n))
    labels = rng.random((q, n)) < frac
    labels[:, 0], labels[:, 1] = True, False  # every query has a positive and a negative
    return scores, labels


def test_ap_loss_with_exact_ranks_is_one_minus_sklearn_ap():
    scores, labels = random_queries(0, 5, 40)
    scores[2, :10] = np.round(scores[2, :10])  # ties too
    loss = sodeep_ap_loss(
        torch.from_numpy(scores), torch.from_numpy(labels), sorter=exact_ranks, reduction="none"
    )
    expected = [1 - average_precision_score(y, s) for s, y in zip(scores, labels)]
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-12, atol=1e-15)


def test_spearman_loss_with_exact_ranks_is_one_minus_scipy():
    rng = np.random.default_rng(1)
    scores, targets = rng.normal(size=(4, 30)), rng.normal(size=(4, 30))
    loss = sodeep_spearman_loss(
        torch.from_numpy(scores), torch.from_numpy(targets), sorter=exact_ranks, reduction="none"
    )
    expected = [1 - spearmanr(s, t)[0] for s, t in zip(scores, targets)]
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_losses_with_the_sorter_are_near_exact_and_differentiable(shipped):
    scores, labels = random_queries(2, 6, DEFAULT_LENGTH)
    s = torch.tensor(scores * 0.5, requires_grad=True)
    y = torch.from_numpy(labels)
    ap = sodeep_ap_loss(s, y, reduction="none")
    exact = sodeep_ap_loss(s.detach(), y, sorter=exact_ranks, reduction="none")
    assert (ap - exact).abs().mean() < 0.05 and (ap - exact).abs().max() < 0.1
    ap.mean().backward()
    grad = s.grad
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0
    # the AP surrogate pushes positives up and negatives down, on the whole
    assert grad[y].mean() < 0 < grad[~y].mean()

    s.grad = None
    target = torch.from_numpy(scores) + 0.3 * torch.randn(6, DEFAULT_LENGTH, dtype=torch.float64)
    sp = sodeep_spearman_loss(s, target, shipped)
    sp.backward()
    assert torch.isfinite(s.grad).all() and s.grad.abs().sum() > 0
    exact_sp = sodeep_spearman_loss(s.detach(), target, exact_ranks)
    assert sp.item() == pytest.approx(exact_sp.item(), abs=0.05)


def test_ap_loss_one_dimensional_and_reductions():
    scores, labels = random_queries(4, 3, 16)
    labels[1] = False  # no positive: loss 0, left out of the mean
    s, y = torch.from_numpy(scores), torch.from_numpy(labels)
    per = sodeep_ap_loss(s, y, exact_ranks, reduction="none")
    assert per[1] == 0
    assert sodeep_ap_loss(s, y, exact_ranks).item() == pytest.approx((per[0] + per[2]).item() / 2)
    assert sodeep_ap_loss(s, y, exact_ranks, "sum").item() == pytest.approx(per.sum().item())
    one = sodeep_ap_loss(s[0], y[0], exact_ranks, "none")
    assert one.shape == () and one.item() == pytest.approx(per[0].item())


def test_loss_of_another_length_is_a_clear_error(shipped):
    s = torch.randn(DEFAULT_LENGTH + 1)
    with pytest.raises(ValueError, match=rf"length {DEFAULT_LENGTH}.*length {DEFAULT_LENGTH + 1}"):
        sodeep_ap_loss(s, s > 0, shipped)
    with pytest.raises(ValueError, match="length"):
        sodeep_spearman_loss(s, s, shipped)


def test_non_finite_scores_are_a_clear_error(shipped):
    for bad in (float("nan"), float("inf")):
        s = torch.randn(DEFAULT_LENGTH)
        s[3] = bad
        with pytest.raises(ValueError, match="finite"):
            sodeep_ap_loss(s, s > 0, shipped)
        with pytest.raises(ValueError, match="finite"):
            sodeep_spearman_loss(s, torch.randn(DEFAULT_LENGTH), shipped)
    with pytest.raises(ValueError, match="targets must be finite"):
        sodeep_spearman_loss(
            torch.randn(DEFAULT_LENGTH), torch.full((DEFAULT_LENGTH,), float("nan")), shipped
        )


def test_bad_labels_are_a_clear_error(shipped):
    s = torch.randn(DEFAULT_LENGTH)
    with pytest.raises(ValueError, match="binary"):
        sodeep_ap_loss(s, torch.full((DEFAULT_LENGTH,), 2), shipped)
    with pytest.raises(ValueError, match="same shape"):
        sodeep_ap_loss(s, torch.ones(3), shipped)
