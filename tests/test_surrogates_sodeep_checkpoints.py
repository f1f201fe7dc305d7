"""SoDeep's checkpoints (qs.surrogates.sodeep.checkpoints): the shipped sorters reproduce
their recorded errors and rank as the paper's do; a checkpoint of the wrong length, a corrupt
or a foreign file are clear errors."""

import numpy as np
import pytest
from scipy.stats import spearmanr

torch = pytest.importorskip("torch")
from qs.surrogates.sodeep import (
    DEFAULT_LENGTH,
    HandcraftedSorter,
    exact_ranks,
    load_sorter,
    rank_l1_error,
    sorter_state,
    synthetic_scores,
    train_sorter,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    """A tiny LSTM sorter of length 8 after one training step, with its metadata."""
    return train_sorter("lstm", 8, steps=1, seed=3, hidden=4, batch_size=4, test_vectors=0)


@pytest.fixture(scope="module")
def shipped():
    return load_sorter()


@pytest.mark.parametrize("kind", ["lstm", "cnn"])
def test_shipped_checkpoint_reproduces_its_l1_error(kind):
    sorter = load_sorter(kind=kind)
    meta = sorter.meta
    assert sorter.length == DEFAULT_LENGTH and meta["kind"] == kind
    # the first vectors of the recorded test set (the whole set: qsrank sodeep eval)
    l1 = rank_l1_error(sorter, DEFAULT_LENGTH, meta["check_vectors"], meta["test_seed"])
    assert l1 == pytest.approx(meta["check_l1"], rel=1e-4)
    assert abs(l1 - meta["test_l1"]) < 0.2 * meta["test_l1"]
    # a constant guess of the middle rank is off by about 1/4; the sorters learned to rank
    assert meta["test_vectors"] == 10_000 and meta["test_l1"] < 0.05


def test_shipped_lstm_beats_the_handcrafted_ranker(shipped):
    # on the recorded check vectors, the learned sorter ranks better than the paper's
    # untrained baseline, as in the paper's Table 1
    handcrafted = rank_l1_error(HandcraftedSorter(), DEFAULT_LENGTH, shipped.meta["check_vectors"])
    assert shipped.meta["check_l1"] < 0.8 * handcrafted


def test_shipped_sorter_ranks_correlate_with_true_ranks(shipped):
    x = synthetic_scores(200, DEFAULT_LENGTH, torch.Generator().manual_seed(12345))
    pred = shipped(x)
    true = exact_ranks(x)
    rho = np.mean([spearmanr(p, t)[0] for p, t in zip(pred.numpy(), true.numpy())])
    assert rho > 0.99
    # and, as in the paper, the LSTM sorter beats the CNN sorter on the same vectors
    cnn = load_sorter(kind="cnn")
    assert (pred - true).abs().mean() < (cnn(x) - true).abs().mean()


def test_checkpoint_of_the_wrong_length(tmp_path, tiny):
    path = tmp_path / "s8.pt"
    torch.save(sorter_state(*tiny), path)
    assert load_sorter(path, length=8).length == 8
    with pytest.raises(ValueError, match="trained for length 8, but the scores have length 64"):
        load_sorter(path, length=64)


def test_corrupt_or_foreign_checkpoints(tmp_path, tiny):
    good = tmp_path / "good.pt"
    torch.save(sorter_state(*tiny), good)
    cut = tmp_path / "cut.pt"
    cut.write_bytes(good.read_bytes()[:200])
    with pytest.raises(ValueError, match="not a readable sorter checkpoint"):
        load_sorter(cut)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"\x00not torch at all")
    with pytest.raises(ValueError, match="not a readable sorter checkpoint"):
        load_sorter(junk)
    with pytest.raises(ValueError, match="cannot read"):
        load_sorter(tmp_path / "missing.pt")
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    with pytest.raises(ValueError, match="not a qsrank SoDeep sorter checkpoint"):
        load_sorter(foreign)
    state = sorter_state(*tiny)
    for change, message in (
        ({"kind": "transformer"}, "unknown sorter kind"),
        ({"format_version": 99}, "format version"),
        ({"hyper": {"hidden": 5}}, "weights do not load"),
    ):
        odd = tmp_path / "odd.pt"
        torch.save({**state, **change}, odd)
        with pytest.raises(ValueError, match=message):
            load_sorter(odd)
