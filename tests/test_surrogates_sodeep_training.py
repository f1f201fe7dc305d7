"""Training SoDeep's sorters (qs.surrogates.sodeep.training): the synthetic vectors, seeded
training that learns, the global state left as it was, and bad arguments."""

import pytest

torch = pytest.importorskip("torch")
from qs.surrogates.sodeep import synthetic_scores, train_sorter

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    """A tiny LSTM sorter of length 8 trained for a few steps, with its metadata."""
    return train_sorter(
        "lstm", 8, steps=100, seed=3, hidden=4, batch_size=16, lr=1e-2, test_vectors=200
    )


def test_synthetic_scores_seeded_and_shaped():
    a = synthetic_scores(400, 16, torch.Generator().manual_seed(5))
    b = synthetic_scores(400, 16, torch.Generator().manual_seed(5))
    c = synthetic_scores(400, 16, torch.Generator().manual_seed(6))
    assert a.shape == (400, 16) and a.dtype == torch.float32
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.isfinite(a).all()
    # the normal family reaches beyond [-1, 1]; the others stay inside
    assert (a.abs() > 1).any() and (a.abs() <= 1).all(dim=1).float().mean() > 0.5


def test_training_is_seeded_and_learns(tiny):
    sorter, meta = tiny
    again, meta2 = train_sorter(
        "lstm", 8, steps=100, seed=3, hidden=4, batch_size=16, lr=1e-2, test_vectors=200
    )
    for p, q in zip(sorter.state_dict().values(), again.state_dict().values()):
        assert torch.equal(p, q)
    assert meta["test_l1"] == meta2["test_l1"]
    _, first = train_sorter(
        "lstm", 8, steps=1, seed=3, hidden=4, batch_size=16, lr=1e-2, test_vectors=200
    )
    assert meta["test_l1"] < 0.5 * first["test_l1"]
    assert meta["kind"] == "lstm" and meta["length"] == 8 and meta["steps"] == 100
    assert meta["hyper"] == {"hidden": 4} and meta["torch_version"] == torch.__version__
    assert not any(p.requires_grad for p in sorter.parameters())


def test_training_restores_threads_and_global_rng():
    threads = torch.get_num_threads()
    torch.manual_seed(11)
    expected = torch.rand(3)
    torch.manual_seed(11)
    train_sorter("cnn", 8, steps=2, seed=0, channels=(2,) * 8, batch_size=4, test_vectors=0)
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_unknown_kind_and_bad_training_arguments():
    with pytest.raises(ValueError, match="unknown sorter kind"):
        train_sorter("gru", 8, steps=1)
    with pytest.raises(ValueError, match="length must be"):
        train_sorter("lstm", 1, steps=1)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        train_sorter("lstm", 8, steps=0)
    with pytest.raises(ValueError, match="unknown size"):
        train_sorter("cnn", 8, steps=1, size="huge")
