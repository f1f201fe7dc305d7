"""qs.surrogates.outside: black-box ranks by hand, Smooth-AP against
pytorch-metric-learning, the LibAUC and torchsort adapters when installed (LibAUC's SOAP over
a batch of embeddings too), and a missing package named."""

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from qs.data.retrieval import make_retrieval_classes
from qs.metrics import average_precision, mean_average_precision_at_r
from qs.surrogates import outside


def _installed(module):
    return importlib.util.find_spec(module) is not None


# ---------------------------------------------------------------------------- black box


def test_blackbox_ranks_gradient_by_hand():
    scores = torch.tensor([3.0, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    ranks = outside.blackbox_ranks(scores, strength=1.5)
    assert ranks.tolist() == [1.0, 3.0, 2.0]
    ranks[1].backward()  # L = rank of the second sample: dL/dr = (0, 1, 0)
    # perturbed scores (3, 2.5, 2) rank (1, 2, 3): gradient -((1, 3, 2) - (1, 2, 3)) / 1.5
    torch.testing.assert_close(scores.grad, torch.tensor([0.0, -2 / 3, 2 / 3], dtype=torch.float64))
    weak = torch.tensor([3.0, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    outside.blackbox_ranks(weak, strength=0.5)[1].backward()  # (3, 1.5, 2): no swap
    assert weak.grad.abs().sum() == 0


def test_blackbox_ap_loss_is_one_minus_exact_ap_and_descends():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 30, generator=g, dtype=torch.float64, requires_grad=True)
    labels = torch.rand(3, 30, generator=g) < 0.3
    labels[:, 0] = True
    value = outside.blackbox_ap_loss(scores, labels, strength=100.0)
    want = np.mean(
        [1 - average_precision(labels[q].numpy(), scores[q].detach().numpy()) for q in range(3)]
    )
    assert value.item() == pytest.approx(want, rel=1e-12)
    value.backward()
    stepped = scores.detach() - 0.05 * scores.grad / scores.grad.abs().max()
    assert outside.blackbox_ap_loss(stepped, labels, strength=100.0).item() < value.item()


# ---------------------------------------------------------------------------- Smooth-AP


def test_smooth_ap_approaches_exact_ap_at_low_temperature():
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(2, 40, generator=g, dtype=torch.float64)
    labels = torch.rand(2, 40, generator=g) < 0.3
    labels[:, 0] = True
    want = np.mean([1 - average_precision(labels[q].numpy(), scores[q].numpy()) for q in range(2)])
    assert outside.smooth_ap_loss(scores, labels, 1e-4).item() == pytest.approx(want, abs=1e-6)
    assert outside.smooth_ap_loss(scores, labels, 1.0).item() != pytest.approx(want, abs=1e-3)


@pytest.mark.skipif(
    not _installed("pytorch_metric_learning"),
    reason="pytorch-metric-learning not installed (the [compare] extra)",
)
def test_smooth_ap_agrees_with_pytorch_metric_learning():
    from pytorch_metric_learning.losses import SmoothAPLoss

    g = torch.Generator().manual_seed(2)
    emb = torch.randn(16, 5, generator=g)
    # equal class counts, as PML requires; as many classes as samples per class, since PML
    # 2.9 reshapes the batch by the one count where it means the other
    classes = torch.arange(4).repeat_interleave(4)
    theirs = SmoothAPLoss(temperature=0.01)(emb, classes).item()
    unit = torch.nn.functional.normalize(emb, dim=1)
    sims = unit @ unit.T  # each embedding a query against the whole batch, itself included
    ours = outside.smooth_ap_loss(sims, classes[None] == classes[:, None], 0.01).item()
    assert ours == pytest.approx(theirs, rel=1e-5)


# ---------------------------------------------------------------------------- LibAUC / torchsort


@pytest.mark.skipif(not _installed("libauc"), reason="libauc not installed (the [compare] extra)")
def test_libauc_losses_train_a_ranking():
    g = torch.Generator().manual_seed(3)
    X = torch.randn(200, 5, generator=g)
    y = (X[:, 0] + 0.3 * torch.randn(200, generator=g) > 0.8)[None]
    for loss in (outside.LibAUCAPLoss(200), outside.LibAUCNDCGLoss(200, [int(y.sum())])):
        torch.manual_seed(0)
        model = torch.nn.Linear(5, 1)
        before = average_precision(y[0].numpy(), model(X)[:, 0].detach().numpy())
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        for _ in range(30):
            idx = torch.randperm(200, generator=g)[:50]
            opt.zero_grad()
            loss(model(X[idx]).T, y[:, idx], idx).backward()
            opt.step()
        after = average_precision(y[0].numpy(), model(X)[:, 0].detach().numpy())
        assert after > max(before, 0.8)


@pytest.mark.skipif(not _installed("libauc"), reason="libauc not installed (the [compare] extra)")
def test_libauc_retrieval_loss_trains_embeddings():
    X, y, _ = make_retrieval_classes(0, classes=4, per_class=20, features=6, latent=3, noise=0.2)
    X = torch.from_numpy(X).float()
    loss = outside.LibAUCRetrievalAPLoss(len(y), 4)
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)
    before = mean_average_precision_at_r(model(X).detach().numpy(), y)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(0)
    for _ in range(15):
        idx = torch.randperm(len(y), generator=g)[:24]
        opt.zero_grad()
        loss(model(X[idx]), torch.from_numpy(y)[idx], idx).backward()
        opt.step()
    assert mean_average_precision_at_r(model(X).detach().numpy(), y) > before + 0.1


@pytest.mark.skipif(not _installed("torchsort"), reason="torchsort not installed")
def test_torchsort_losses_match_exact_at_small_strength():
    scores = torch.tensor([[3.0, 1.0, 2.0, 0.5]], dtype=torch.float64)
    labels = torch.tensor([[1, 0, 1, 0]])
    want = 1 - average_precision(labels[0].numpy(), scores[0].numpy())
    assert outside.soft_rank_ap_loss(scores, labels, 1e-3).item() == pytest.approx(want, abs=1e-6)
    assert outside.soft_rank_spearman_loss(scores, scores, 1e-3).item() == pytest.approx(
        0.0, abs=1e-6
    )


def test_missing_package_names_what_to_install(monkeypatch):
    real = importlib.import_module

    def fake(name, *args):
        if name.startswith("torchsort"):
            raise ImportError("no")
        return real(name, *args)

    monkeypatch.setattr(outside.importlib, "import_module", fake)
    with pytest.raises(ImportError, match="needs the package torchsort.*pip install torchsort"):
        outside.soft_rank_ap_loss(torch.zeros(1, 3), torch.tensor([[1, 0, 0]]))
