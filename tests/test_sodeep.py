"""SoDeep: exact ranks, the sorters, their training, the shipped checkpoints, the AP and
Spearman losses built on a frozen sorter, and bad input."""

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score

torch = pytest.importorskip("torch")
from qs.surrogates import sodeep
from qs.surrogates.sodeep import (
    DEFAULT_LENGTH,
    CNNSorter,
    HandcraftedSorter,
    LSTMSorter,
    exact_ranks,
    load_sorter,
    rank_l1_error,
    sodeep_ap_loss,
    sodeep_spearman_loss,
    sorter_state,
    standardise,
    synthetic_scores,
    train_sorter,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def shipped():
    return load_sorter()


@pytest.fixture(scope="module")
def tiny():
    """A tiny LSTM sorter of length 8 trained for a few steps, with its metadata."""
    return train_sorter("lstm", 8, steps=100, seed=3, hidden=4, batch_size=16, lr=1e-2,
                        test_vectors=200)


def random_queries(seed, q, n, frac=0.3):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(q, n))
    labels = rng.random((q, n)) < frac
    labels[:, 0], labels[:, 1] = True, False  # every query has a positive and a negative
    return scores, labels


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


def test_synthetic_scores_seeded_and_shaped():
    a = synthetic_scores(400, 16, torch.Generator().manual_seed(5))
    b = synthetic_scores(400, 16, torch.Generator().manual_seed(5))
    c = synthetic_scores(400, 16, torch.Generator().manual_seed(6))
    assert a.shape == (400, 16) and a.dtype == torch.float32
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.isfinite(a).all()
    # the normal family reaches beyond [-1, 1]; the others stay inside
    assert (a.abs() > 1).any() and (a.abs() <= 1).all(dim=1).float().mean() > 0.5


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


def test_training_is_seeded_and_learns(tiny):
    sorter, meta = tiny
    again, meta2 = train_sorter("lstm", 8, steps=100, seed=3, hidden=4, batch_size=16, lr=1e-2,
                                test_vectors=200)
    for p, q in zip(sorter.state_dict().values(), again.state_dict().values()):
        assert torch.equal(p, q)
    assert meta["test_l1"] == meta2["test_l1"]
    _, first = train_sorter("lstm", 8, steps=1, seed=3, hidden=4, batch_size=16, lr=1e-2,
                            test_vectors=200)
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


def test_ap_loss_with_exact_ranks_is_one_minus_sklearn_ap():
    scores, labels = random_queries(0, 5, 40)
    scores[2, :10] = np.round(scores[2, :10])  # ties too
    loss = sodeep_ap_loss(torch.from_numpy(scores), torch.from_numpy(labels),
                          sorter=exact_ranks, reduction="none")
    expected = [1 - average_precision_score(y, s) for s, y in zip(scores, labels)]
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-12, atol=1e-15)


def test_spearman_loss_with_exact_ranks_is_one_minus_scipy():
    rng = np.random.default_rng(1)
    scores, targets = rng.normal(size=(4, 30)), rng.normal(size=(4, 30))
    loss = sodeep_spearman_loss(torch.from_numpy(scores), torch.from_numpy(targets),
                                sorter=exact_ranks, reduction="none")
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
    assert sodeep_ap_loss(s, y, exact_ranks).item() == pytest.approx(
        (per[0] + per[2]).item() / 2)
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
        sodeep_spearman_loss(torch.randn(DEFAULT_LENGTH),
                             torch.full((DEFAULT_LENGTH,), float("nan")), shipped)


def test_bad_labels_are_a_clear_error(shipped):
    s = torch.randn(DEFAULT_LENGTH)
    with pytest.raises(ValueError, match="binary"):
        sodeep_ap_loss(s, torch.full((DEFAULT_LENGTH,), 2), shipped)
    with pytest.raises(ValueError, match="same shape"):
        sodeep_ap_loss(s, torch.ones(3), shipped)


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
    for change, message in (({"kind": "transformer"}, "unknown sorter kind"),
                            ({"format_version": 99}, "format version"),
                            ({"hyper": {"hidden": 5}}, "weights do not load")):
        odd = tmp_path / "odd.pt"
        torch.save({**state, **change}, odd)
        with pytest.raises(ValueError, match=message):
            load_sorter(odd)


def test_unknown_kind_and_bad_training_arguments():
    with pytest.raises(ValueError, match="unknown sorter kind"):
        train_sorter("gru", 8, steps=1)
    with pytest.raises(ValueError, match="length must be"):
        train_sorter("lstm", 1, steps=1)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        train_sorter("lstm", 8, steps=0)
    with pytest.raises(ValueError, match="unknown size"):
        train_sorter("cnn", 8, steps=1, size="huge")


def test_cli_choices_match_their_sources():
    import cli.sodeep as cli_sodeep

    assert cli_sodeep.SORTER_KINDS == sodeep.KINDS
    assert cli_sodeep.SORTER_LENGTH == DEFAULT_LENGTH


def test_cli_train_then_eval(tmp_path):
    from click.testing import CliRunner

    from cli.main import main

    out = tmp_path / "cnn8.pt"
    result = CliRunner().invoke(main, ["sodeep", "train", "--kind", "cnn", "--length", "8",
                                       "--steps", "3", "--test-vectors", "50", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "cnn sorter, length 8" in result.output and out.is_file()
    meta = load_sorter(out).meta
    assert meta["steps"] == 3 and meta["test_vectors"] == 50 and meta["train_seconds"] >= 0
    assert meta["provenance"]["seed"] == 0
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left no temporary file

    result = CliRunner().invoke(main, ["sodeep", "eval", "--checkpoint", str(out),
                                       "--vectors", "50"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("| sorter") and len(lines) == 4
    handcrafted, cnn = ([c.strip() for c in line.split("|")[1:-1]] for line in lines[2:])
    assert handcrafted[0] == "handcrafted" and handcrafted[-1] == "0.0350"
    # the same seeded test vectors as the error recorded at training
    assert cnn[0] == "cnn" and cnn[-2] == f"{meta['test_l1']:.4f}" and cnn[-1] == "0.0120"


def test_cli_bad_input_is_one_line(tmp_path):
    from click.testing import CliRunner

    from cli.main import main

    runner = CliRunner()
    result = runner.invoke(main, ["sodeep", "train", "--kind", "cnn", "--hidden", "4",
                                  "--length", "8", "--steps", "1", "--out",
                                  str(tmp_path / "x.pt")])
    assert result.exit_code == 1 and "no hyper-parameter hidden" in result.output
    assert not (tmp_path / "x.pt").exists()
    result = runner.invoke(main, ["sodeep", "train", "--length", "8", "--steps", "1",
                                  "--out", str(tmp_path)])
    assert result.exit_code == 2 and "is a directory" in result.output
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"garbage")
    result = runner.invoke(main, ["sodeep", "eval", "--checkpoint", str(junk)])
    assert result.exit_code == 1 and "not a readable sorter checkpoint" in result.output
    assert "Traceback" not in result.output
