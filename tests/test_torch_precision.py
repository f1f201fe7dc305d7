"""qs.torch with float16 and bfloat16 scores: solved in float64, answered in their dtype."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from qs.inference.batch import lai_batch  # noqa: E402
from qs.torch import rank_hinge_loss  # noqa: E402
from qs.torch.retrieval import retrieval_loss  # noqa: E402

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
    value = rank_hinge_loss(x, labels, loss, method, "none")
    value.sum().backward()
    wide = x.detach().double().requires_grad_(True)
    ref = rank_hinge_loss(wide, labels, loss, method, "none")
    ref.sum().backward()
    assert value.dtype == dtype and x.grad.dtype == dtype
    torch.testing.assert_close(value, ref.to(dtype), rtol=0, atol=0)
    torch.testing.assert_close(x.grad, wide.grad.to(dtype), rtol=0, atol=0)


def test_ties_made_by_rounding_follow_the_documented_rule():
    """bfloat16 keeps 8 bits: scores 1 + 2^-10 apart collapse to ties. A negative tied with
    positives takes the larger interleaving rank wherever the objectives tie, as the kernels
    do on the float64 values."""
    base = torch.tensor([1.0, 1.0 + 2**-10, 1.0 - 2**-10, 0.5, 1.0 + 2**-9, 0.25],
                        dtype=torch.float64)
    labels = torch.tensor([True, False, True, False, False, True])
    half = base.to(torch.bfloat16)
    assert len(set(half.tolist())) < len(set(base.tolist()))
    res = lai_batch(half.double()[None].numpy(), labels[None].numpy(), "ap", gradient=True)
    x = half.clone().requires_grad_(True)
    rank_hinge_loss(x, labels, "ap", reduction="sum").backward()
    torch.testing.assert_close(x.grad, torch.from_numpy(res.coef[0]).to(torch.bfloat16),
                               rtol=0, atol=0)


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
