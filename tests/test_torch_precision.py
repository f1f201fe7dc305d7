"""qs.torch with float16 and bfloat16 scores: solved in float64, answered in their dtype."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from qs.inference import lai
from qs.inference.batch import lai_batch
from qs.torch import rank_hinge_loss
from qs.torch._exact import lai_torch
from qs.torch.retrieval import retrieval_loss
from tests.test_inference_hinge import exact_hinge, spread_input

torch.set_num_threads(1)


@pytest.mark.parametrize("method", ["auto", "torch"])
@pytest.mark.parametrize("loss", ["ap", "ndcg", "01"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_is_the_float64_loss_of_the_same_values(dtype, loss, method):
    """The rounded scores, read exactly in float64, give the loss and gradient; each comes
    back rounded once to the input dtype."""
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.normal(size=(5, 300))).to(dtype).requires_grad_(True)
    labels = torch.from_numpy(rng.random((5, 300)) < 0.2)
    value = rank_hinge_loss(x, labels, loss, method, "none", dim=-1)
    value.sum().backward()
    wide = x.detach().double().requires_grad_(True)
    ref = rank_hinge_loss(wide, labels, loss, method, "none", dim=-1)
    ref.sum().backward()
    assert value.dtype == dtype and x.grad.dtype == dtype
    torch.testing.assert_close(value, ref.to(dtype), rtol=0, atol=0)
    torch.testing.assert_close(x.grad, wide.grad.to(dtype), rtol=0, atol=0)


def test_ties_made_by_rounding_follow_the_documented_rule():
    """bfloat16 keeps 8 bits: scores 1 + 2^-10 apart collapse to ties. A negative tied with
    positives takes the larger interleaving rank wherever the objectives tie, as the kernels
    do on the float64 values."""
    base = torch.tensor(
        [1.0, 1.0 + 2**-10, 1.0 - 2**-10, 0.5, 1.0 + 2**-9, 0.25], dtype=torch.float64
    )
    labels = torch.tensor([True, False, True, False, False, True])
    half = base.to(torch.bfloat16)
    assert len(set(half.tolist())) < len(set(base.tolist()))
    res = lai_batch(half.double()[None].numpy(), labels[None].numpy(), "ap", gradient=True)
    x = half.clone().requires_grad_(True)
    rank_hinge_loss(x, labels, "ap", reduction="sum", dim=-1).backward()
    torch.testing.assert_close(
        x.grad, torch.from_numpy(res.coef[0]).to(torch.bfloat16), rtol=0, atol=0
    )


def test_autocast_embeddings_reach_the_retrieval_loss():
    rng = np.random.default_rng(2)
    emb = torch.from_numpy(rng.normal(size=(16, 8))).float().requires_grad_(True)
    labels = torch.from_numpy(rng.integers(0, 3, 16))
    layer = torch.nn.Linear(8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(emb)
        assert out.dtype == torch.bfloat16
        value = retrieval_loss(out, labels)
    value.backward()
    assert value.dtype == torch.bfloat16 and emb.grad.dtype == torch.float32
    assert torch.isfinite(emb.grad).all() and emb.grad.abs().sum() > 0


@pytest.mark.parametrize("method", ["auto", "bucket", "torch"])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
@pytest.mark.parametrize(
    "spread,dtype",
    [(1e15, torch.float64), (1e17, torch.float64), (1e300, torch.float64), (3e38, torch.float32)],
)
def test_hinge_is_exact_at_a_large_spread(spread, dtype, loss, method):
    """One positive at +M and one negative at -M on an ordinary ranking: the loss is the
    hinge of the ranks, exact to the dtype's rounding (the difference of two sums of
    scores gave 1.094 at M = 1e15, 0 at 1e17 and 1.86e283 at 1e300); the torch operations
    find the kernels' ranks there."""
    rows = [spread_input(spread, 40, seed) for seed in (0, 1)]
    scores = np.stack([r[0] for r in rows])
    labels = np.stack([r[1] for r in rows])
    x = torch.from_numpy(scores).to(dtype).requires_grad_(True)
    value = rank_hinge_loss(x, torch.from_numpy(labels), loss, method, "none", dim=-1)
    wide = x.detach().double().numpy()
    ranks = [lai(s, y, loss).neg_rank for s, y in zip(wide, labels)]
    exact = [exact_hinge(s, y, r, loss) for s, y, r in zip(wide, labels, ranks)]
    rtol = 1e-13 if dtype == torch.float64 else 1e-7
    np.testing.assert_allclose(value.detach().double().numpy(), exact, rtol=rtol)
    value.sum().backward()
    assert torch.isfinite(x.grad).all()
    hinge, _, rank = lai_torch(torch.from_numpy(wide), torch.from_numpy(labels), loss)
    for q in range(2):
        np.testing.assert_array_equal(rank[q][~torch.from_numpy(labels[q])].numpy(), ranks[q])
    np.testing.assert_allclose(hinge.numpy(), exact, rtol=1e-13)


@pytest.mark.parametrize("method", ["auto", "torch"])
def test_zero_one_hinge_at_a_large_spread(method):
    scores, labels = spread_input(1e300)
    expected = lai(scores, labels, "01").hinge
    value = rank_hinge_loss(torch.from_numpy(scores), torch.from_numpy(labels), "01", method)
    assert float(value) == pytest.approx(expected, rel=1e-13) and 0.5 < expected < 2.0
