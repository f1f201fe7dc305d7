"""SoDeep's sorters (qs.surrogates.sodeep.sorters): the exact ranks and their tie rule,
the networks' shapes, invariance to the scores' units and output range, and the handcrafted
baseline."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from qs.surrogates.sodeep import (
    CNNSorter,
    HandcraftedSorter,
    LSTMSorter,
    exact_ranks,
    standardise,
    synthetic_scores,
)

torch.set_num_threads(1)


def test_exact_ranks_paper_convention_and_ties():
    x = torch.tensor([[0.3, -1.0, 2.0, 0.5]])
    # the highest score has rank 1/d, the lowest 1
    np.testing.assert_allclose(exact_ranks(x).numpy(), [[3 / 4, 1.0, 1 / 4, 2 / 4]])
    # tied scores share the largest rank of their group: #{j : s_j >= s_i} / d
    tied = torch.tensor([1.0, 0.0, 1.0, 1.0, -2.0])
    np.testing.assert_allclose(exact_ranks(tied).numpy(), [0.6, 0.8, 0.6, 0.6, 1.0])
    rng = np.random.default_rng(0)
    v = rng.normal(size=(20, 30))
    by_count = ((v[:, None, :] >= v[:, :, None]).sum(-1)) / 30
    np.testing.assert_allclose(exact_ranks(torch.from_numpy(v)).numpy(), by_count)


@pytest.mark.parametrize("cls", [LSTMSorter, CNNSorter])
def test_sorter_shapes(cls):
    sorter = cls(12)
    out = sorter(torch.randn(5, 12))
    assert out.shape == (5, 12)


@pytest.mark.parametrize("cls", [LSTMSorter, CNNSorter])
def test_sorters_ignore_shift_and_scale_and_stay_in_the_rank_range(cls):
    torch.manual_seed(0)
    sorter = cls(16).eval()
    x = torch.randn(6, 16)
    # ranks do not change under an increasing affine map, nor do the sorters' outputs
    torch.testing.assert_close(sorter(1e3 * x - 7.0), sorter(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(sorter(1e-3 * x + 2.0), sorter(x), rtol=1e-4, atol=1e-5)
    # whatever the weights, the outputs lie in [1/d, 1], the range of the exact ranks
    with torch.no_grad():
        for p in sorter.parameters():
            p.mul_(50)
    out = sorter(x)
    assert (out >= 1 / 16).all() and (out <= 1).all() and out.std() > 0.1


def test_standardise_keeps_ranks_and_is_finite_on_constant_vectors():
    x = torch.randn(5, 30, dtype=torch.float64)
    z = standardise(x)
    assert torch.equal(exact_ranks(z), exact_ranks(x))
    torch.testing.assert_close(z.mean(-1), torch.zeros(5, dtype=torch.float64))
    torch.testing.assert_close(z.std(-1, unbiased=False), torch.ones(5, dtype=torch.float64))
    flat = torch.full((2, 8), 3.0, requires_grad=True)
    out = LSTMSorter(8)(flat)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(flat.grad).all()


def test_handcrafted_sorter_is_near_exact_and_smooth():
    x = synthetic_scores(50, 20, torch.Generator().manual_seed(1))
    soft = HandcraftedSorter()(x)
    assert (soft - exact_ranks(x)).abs().mean() < 0.05
    # as the scale grows, it converges to the exact ranks (no ties in x)
    sharp = HandcraftedSorter(scale=1e6)(x)
    assert (sharp - exact_ranks(x)).abs().mean() < 1e-3
