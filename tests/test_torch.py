"""qs.torch: the structured hinges as autograd functions, against lai and finite differences."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qs.estimators import RankSVM
from qs.inference import lai
from qs.inference.batch import lai_batch
from tests import naive

torch = pytest.importorskip("torch")
from qs.torch import RankHingeLoss, rank_hinge_loss
from qs.torch._exact import lai_torch

torch.set_num_threads(1)
LOSSES = ["ap", "ndcg", "01"]


def queries(seed, q=6, n=50, frac=0.3, ties=False):
    """Scores and labels of q queries; query 0 has no positive, query 1 no negative."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, (q, n)).astype(float) if ties else rng.normal(size=(q, n))
    labels = rng.random((q, n)) < frac
    labels[0], labels[1] = False, True
    return torch.from_numpy(scores), torch.from_numpy(labels)


def hinge_of_lai(scores, labels, loss):
    """objective - ground_truth_F of lai per row; 0 for a row without both classes."""
    out = []
    for s, y in zip(scores.numpy(), labels.numpy()):
        if y.all() or not y.any():
            out.append(0.0)
        else:
            res = lai(s, y, loss)
            out.append(res.objective - res.ground_truth_F)
    return np.array(out)


@pytest.mark.parametrize("method", ["auto", "torch"])
@pytest.mark.parametrize("loss", LOSSES)
def test_value_is_lai_objective_minus_ground_truth_f(loss, method):
    scores, labels = queries(1)
    expected = hinge_of_lai(scores, labels, loss)
    values = rank_hinge_loss(scores, labels, loss, method, reduction="none", dim=-1)
    assert values.shape == (6,) and values.dtype == torch.float64
    np.testing.assert_allclose(values.numpy(), expected, rtol=1e-12, atol=1e-15)
    assert rank_hinge_loss(scores, labels, loss, method, "sum", dim=-1).item() == pytest.approx(
        expected.sum(), rel=1e-12
    )
    # the mean leaves out the two queries without a ranking
    assert rank_hinge_loss(scores, labels, loss, method, dim=-1).item() == pytest.approx(
        expected.sum() / 4, rel=1e-12
    )
    one = rank_hinge_loss(scores[3], labels[3], loss, method, "none", dim=-1)
    assert one.shape == () and one.item() == pytest.approx(expected[3], rel=1e-12)


@pytest.mark.parametrize("method", ["auto", "torch"])
@pytest.mark.parametrize("loss", LOSSES)
def test_gradient_matches_finite_differences(loss, method):
    """Random normal scores have no near-ties, so the optimum is unique around them and the
    hinge is linear there: the gradient is its derivative."""
    scores, labels = queries(2, q=4, n=30)
    x = scores.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda s: rank_hinge_loss(s, labels, loss, method, "none", dim=-1),
        (x,),
        eps=1e-7,
        atol=1e-7,
    )
    assert torch.autograd.gradcheck(
        lambda s: rank_hinge_loss(s, labels, loss, method, dim=-1), (x,), eps=1e-7, atol=1e-7
    )


@pytest.mark.parametrize("method", ["auto", "torch"])
@pytest.mark.parametrize("loss", LOSSES)
def test_queries_without_both_classes_give_zero_and_no_gradient(loss, method):
    scores, labels = queries(3)
    x = scores.clone().requires_grad_(True)
    rank_hinge_loss(x, labels, loss, method, dim=-1).backward()
    assert not x.grad[:2].any() and x.grad[2:].abs().sum() > 0
    none = labels[:1].clone()
    y = scores[:1].clone().requires_grad_(True)
    loss_value = rank_hinge_loss(y, none, loss, method, dim=-1)
    loss_value.backward()
    assert loss_value.item() == 0.0 and not y.grad.any()


@pytest.mark.parametrize("loss", LOSSES)
def test_batched_call_equals_a_loop_over_queries(loss):
    scores, labels = queries(4, q=5, n=80)
    x = scores.clone().requires_grad_(True)
    rank_hinge_loss(x, labels, loss, reduction="sum", dim=-1).backward()
    for q in range(5):
        xq = scores[q].clone().requires_grad_(True)
        value = rank_hinge_loss(xq, labels[q], loss, reduction="none", dim=-1)
        value.backward()
        torch.testing.assert_close(xq.grad, x.grad[q], rtol=0, atol=0)


@pytest.mark.parametrize("loss", LOSSES)
def test_float32_and_transposed_logits(loss):
    """float32 scores give float32 values and gradients (computed in float64), and the
    transposed (non-contiguous) logits of a mini-batch the same as their contiguous copy."""
    scores, labels = queries(5, q=4, n=64)
    logits = scores.T.to(torch.float32).requires_grad_(True)  # (batch, classes)
    value = rank_hinge_loss(logits.T, labels, loss, dim=-1)
    value.backward()
    assert value.dtype == torch.float32 and logits.grad.dtype == torch.float32
    ref = rank_hinge_loss(logits.detach().T.contiguous().double(), labels, loss, dim=-1)
    assert value.item() == pytest.approx(ref.item(), rel=1e-6)


def test_module_is_the_function():
    scores, labels = queries(6)
    module = RankHingeLoss("ndcg", reduction="sum", dim=-1)
    assert (
        module(scores, labels).item()
        == rank_hinge_loss(scores, labels, "ndcg", reduction="sum", dim=-1).item()
    )
    assert "ndcg" in repr(module)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("loss", LOSSES)
def test_torch_method_is_the_cpu_kernels(loss, ties):
    """Same hinge, gradient and ranks as the numba kernels, ties included, on rows small and
    large (the level-wise divide and conquer runs 15 levels at 20000 samples)."""
    for n, frac in ((7, 0.4), (300, 0.1), (20_000, 0.01), (3000, 0.5)):
        scores, labels = queries(int(n), q=4, n=n, frac=frac, ties=ties)
        hinge, grad, rank = lai_torch(scores, labels, loss)
        ref = lai_batch(scores.numpy(), labels.numpy(), loss, gradient=True)
        np.testing.assert_allclose(hinge.numpy(), ref.hinge, rtol=1e-12, atol=1e-13)
        np.testing.assert_array_equal(grad.numpy(), ref.coef)
        np.testing.assert_array_equal(rank.numpy(), ref.rank)


def test_torch_method_breaks_an_exact_tie_as_the_kernels():
    """P = 1, N = 2, AP: moving the negative at 0.5 below the positive at 1.0 changes the
    objective by 2 (1.0 - 0.5) / 2 - 1/2 = 0 exactly; every method takes the larger rank."""
    scores = torch.tensor([[1.0, 0.5, -3.0]], dtype=torch.float64)
    labels = torch.tensor([[True, False, False]])
    _, _, rank = lai_torch(scores, labels, "ap")
    assert rank.tolist() == [[0, 2, 2]]
    np.testing.assert_array_equal(lai_batch(scores.numpy(), labels.numpy()).rank, rank.numpy())


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_torch_method_is_the_optimum_over_all_orderings(loss):
    rng = np.random.default_rng(11)
    for n in range(2, 7):
        for ties in (False, True):
            scores = rng.integers(0, 3, n).astype(float) if ties else rng.normal(size=n)
            labels = np.r_[True, False, rng.random(n - 2) < 0.5]
            hinge, _, _ = lai_torch(
                torch.from_numpy(scores)[None], torch.from_numpy(labels)[None], loss
            )
            truth = scores[labels].mean() - scores[~labels].mean()
            best = naive.best_objective(scores, labels, loss)
            assert hinge.item() + truth == pytest.approx(best, rel=1e-12, abs=1e-15)


def test_subgradient_descent_reaches_the_rank_svm_objective():
    """A linear model trained on the torch loss by averaged subgradient descent (steps 1/t
    on the 1-strongly convex primal) reaches the optimum that RankSVM's solver certifies."""
    rng = np.random.default_rng(12)
    X = rng.normal(size=(120, 5))
    y = X @ rng.normal(size=5) + rng.normal(size=120) > 0.8
    C = 5.0
    svm = RankSVM(loss="ap", C=C, tol=1e-6, fit_intercept=False).fit(X, y)
    optimum, gap = svm.objective_curve_[-1], svm.gap_curve_[-1]
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)

    def primal(w):
        return 0.5 * w @ w + C * rank_hinge_loss(Xt @ w, yt, "ap", dim=-1)

    w = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    w_avg = torch.zeros(5, dtype=torch.float64)
    for t in range(1, 3001):
        w.grad = None
        primal(w).backward()
        with torch.no_grad():
            w -= w.grad / t
            w_avg += 2.0 / (t + 1) * (w - w_avg)
    reached = primal(w_avg).item()
    assert primal(torch.from_numpy(svm.coef_[0])).item() == pytest.approx(optimum, rel=1e-12)
    assert optimum - gap - 1e-9 <= reached <= optimum * (1 + 2e-3)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"labels": [[1, 0, 2]]}, ValueError, r"binary.*got 2 at index \(0, 2\)"),
        ({"labels": [[1.0, 0.5, 0.0]]}, ValueError, "binary"),
        ({"labels": [["a", "b", "c"]]}, ValueError, "bool or numeric"),
        ({"labels": [1, 0, 1]}, ValueError, "same shape"),
        ({"scores": torch.zeros(1, 1, 3)}, ValueError, "1-D .* or 2-D"),
        (
            {"scores": torch.tensor([[0.0, float("nan"), 1.0]])},
            ValueError,
            "finite; got nan at query 0, sample 1",
        ),
        (
            {"scores": torch.tensor([0.0, 1.0, float("inf")]), "labels": [1, 0, 1]},
            ValueError,
            "finite; got inf at query 0, sample 2",
        ),
        (
            {"scores": torch.tensor([[0.0, float("inf"), 1.0]]), "method": "torch"},
            ValueError,
            r"finite; got inf at index \(0, 1\)",
        ),
        (
            {"scores": torch.tensor([[0.0, float("nan"), 1.0]]), "mask": [[True, False, False]]},
            ValueError,
            r"finite; got nan at index \(0, 1\)",
        ),
        ({"scores": torch.tensor([[0, 1, 2]])}, ValueError, "floating-point"),
        ({"scores": np.zeros((1, 3))}, TypeError, "torch.Tensor"),
        ({"loss": "auc"}, ValueError, "loss must be one of"),
        ({"method": "bogus"}, ValueError, "Unknown method"),
        ({"loss": "ndcg", "method": "yue"}, ValueError, "does not support"),
        ({"reduction": "max"}, ValueError, "reduction must be one of"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(kwargs, error, message):
    args = {
        "scores": torch.tensor([[0.0, 1.0, 2.0]]),
        "labels": torch.tensor([[1, 0, 1]]),
        "dim": -1,
    }
    args.update(kwargs)
    with pytest.raises(error, match=message):
        rank_hinge_loss(**args)


@pytest.mark.parametrize("kernels", [True, False])
def test_auto_on_cuda_runs_the_torch_method_from_its_threshold(monkeypatch, kernels):
    import qs.torch.losses as qt

    monkeypatch.setattr(qt, "cuda_kernels", lambda: kernels)
    start = qt.CUDA_TORCH_FROM if kernels else qt.CUDA_TORCH_OPS_FROM
    assert qt._torch_method(True, start, "auto")
    assert not qt._torch_method(True, start - 1, "auto")
    assert not qt._torch_method(False, 10 * start, "auto")
    assert qt._torch_method(False, 1, "torch")
    assert not qt._torch_method(True, 10 * start, "qs")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("method", ["auto", "torch"])
@pytest.mark.parametrize("loss", LOSSES)
def test_cuda_equals_cpu(loss, method):
    scores, labels = queries(13, q=8, n=5000, frac=0.05)
    x = scores.cuda().requires_grad_(True)
    value = rank_hinge_loss(x, labels.cuda(), loss, method, reduction="sum", dim=-1)
    value.backward()
    ref = lai_batch(scores.numpy(), labels.numpy(), loss, gradient=True)
    assert value.item() == pytest.approx(ref.hinge.sum(), rel=1e-12)
    np.testing.assert_array_equal(x.grad.cpu().numpy(), ref.coef)


@pytest.mark.parametrize("loss", LOSSES)
def test_long_rows_are_lai_row_by_row(loss, monkeypatch):
    """Rows of lai_batch's LAI_ROW_MIN scores or more are solved by lai one by one: its hinge
    and coef(R_bar) - coef(R*) exactly, and the batch kernel's to rounding."""
    from qs.inference import batch

    n = 3000
    scores, labels = queries(14, q=3, n=n, frac=0.01)
    monkeypatch.setattr(batch, "LAI_ROW_MIN", n)
    x = scores.clone().requires_grad_(True)
    values = rank_hinge_loss(x, labels, loss, reduction="none", dim=-1)
    values.sum().backward()
    for q in range(2, 3):
        res = lai(scores[q].numpy(), labels[q].numpy(), loss)
        y = labels[q].numpy()
        assert values[q].item() == res.objective - res.ground_truth_F
        h = 0.5 / len(y)  # coef(R*) of the 0-1 hinge; 1/P and -1/N for AP and NDCG
        truth = (
            np.where(y, h, -h) if loss == "01" else np.where(y, 1.0 / y.sum(), -1.0 / (~y).sum())
        )
        np.testing.assert_array_equal(x.grad[q].numpy(), res.coef - truth)
    assert not x.grad[:2].any() and not values[:2].any()
    monkeypatch.undo()
    ref = lai_batch(scores.numpy(), labels.numpy(), loss, gradient=True)
    np.testing.assert_allclose(values.detach().numpy(), ref.hinge, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(x.grad.numpy(), ref.coef, rtol=1e-12, atol=1e-15)


def test_import_without_torch_names_the_extra():
    code = (
        "import sys\nsys.modules['torch'] = None\n"
        "try:\n    import qs.torch\nexcept ImportError as err:\n    print(err)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert "[torch] extra" in out.stdout


def test_threaded_inference_keeps_torch_thread_count():
    """The batch's threads (and lai's, on long rows) leave torch's thread count as set: numba's
    OpenMP threading layer, once launched, would set it for the whole process. In a fresh
    process, where no layer is launched yet."""
    code = (
        "import numpy as np, torch\n"
        "torch.set_num_threads(1)\n"
        "torch.ones(1 << 22).sum()\n"  # torch's OpenMP threads in use
        "from qs.inference import batch, bucket\n"
        "from qs.torch import rank_hinge_loss\n"
        "batch.THREADED_MIN = batch.LAI_ROW_MIN = bucket.THREADED_MIN = 64\n"
        "rng = np.random.default_rng(0)\n"
        "x = torch.from_numpy(rng.normal(size=(8, 64)))\n"
        "rank_hinge_loss(x[:, :32], x[:, :32] > 0.5, dim=-1)\n"
        "y = torch.from_numpy(rng.normal(size=(2, 9000)))\n"
        "rank_hinge_loss(y, y > 2.0, dim=-1)\n"  # lai's bucket method, on threads
        "print(torch.get_num_threads())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.stdout.split() == ["1"]


@pytest.mark.parametrize("method", ["auto", "torch"])
@pytest.mark.parametrize("loss", LOSSES)
def test_logits_of_a_batch_rank_along_dim_0(loss, method):
    """(N, C) logits, as torch's classification losses take them: by default each class
    ranks the N samples (its column), the same as the transposed call with dim=-1, value and
    gradient, for the function and the module alike."""
    rng = np.random.default_rng(17)
    logits = torch.from_numpy(rng.normal(size=(60, 4)))
    onehot = torch.nn.functional.one_hot(torch.from_numpy(rng.integers(0, 4, 60)), 4)
    mask = torch.from_numpy(rng.random((60, 4)) < 0.1)
    for kwargs in ({}, {"mask": mask}):
        x = logits.clone().requires_grad_(True)
        value = rank_hinge_loss(x, onehot, loss, method, "none", **kwargs)
        value.sum().backward()
        t = logits.T.clone().requires_grad_(True)
        rows = {k: v.T for k, v in kwargs.items()}
        ref = rank_hinge_loss(t, onehot.T, loss, method, "none", dim=-1, **rows)
        ref.sum().backward()
        assert value.shape == (4,)
        torch.testing.assert_close(value, ref, rtol=0, atol=0)
        torch.testing.assert_close(x.grad, t.grad.T, rtol=0, atol=0)
        assert (
            rank_hinge_loss(logits, onehot, loss, method, dim=0, **kwargs).item()
            == rank_hinge_loss(logits, onehot, loss, method, **kwargs).item()
        )
        module = RankHingeLoss(loss, method, "none")
        torch.testing.assert_close(module(logits, onehot, **kwargs), value.detach(), rtol=0, atol=0)
    # each class's column alone, as a 1-D query
    columns = torch.stack(
        [rank_hinge_loss(logits[:, c], onehot[:, c], loss, method) for c in range(4)]
    )
    torch.testing.assert_close(
        rank_hinge_loss(logits, onehot, loss, method, "none"), columns, rtol=0, atol=0
    )
    # the rows of the same matrix are other rankings: the layout matters
    by_rows = rank_hinge_loss(logits, onehot, loss, method, "none", dim=-1)
    assert by_rows.shape == (60,)


@pytest.mark.parametrize("dim", [2, -3, True, 0.0, "0"])
def test_a_dim_the_scores_do_not_have_is_refused(dim):
    with pytest.raises(ValueError, match="dim must be the dimension along which items are"):
        rank_hinge_loss(torch.zeros(3, 2), torch.tensor([[1, 0], [0, 1], [1, 0]]), dim=dim)
    with pytest.raises(ValueError, match="dim must be"):
        rank_hinge_loss(torch.zeros(3), torch.tensor([1, 0, 1]), dim=1)
    one = rank_hinge_loss(torch.tensor([0.5, 1.0, -1.0]), torch.tensor([1, 0, 1]), dim=-1)
    assert (
        one.item()
        == rank_hinge_loss(torch.tensor([0.5, 1.0, -1.0]), torch.tensor([1, 0, 1])).item()
    )


def test_docstring_examples_run():
    """The layouts' examples in the docstrings of the loss and its module."""
    import doctest

    import qs.torch.losses

    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
    for fn in (rank_hinge_loss, RankHingeLoss):
        for test in finder.find(fn, globs=vars(qs.torch.losses)):
            runner.run(test)
    assert runner.failures == 0 and runner.tries >= 10
