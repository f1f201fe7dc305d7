"""lai_batch: one call for a batch of queries, row by row the result of lai."""

import subprocess
import sys

import numpy as np
import pytest

from qs.inference import batch, lai
from qs.inference.batch import lai_batch
from qs.ssvm import ground_truth_coef

METHODS_OF = {
    "ap": ["auto", "qs", "yue", "search", "sort_dc", "bucket", "bucket_sort", "brute"],
    "ndcg": ["auto", "qs", "chakrabarti", "sort_dc", "bucket", "bucket_sort", "brute"],
    "01": ["auto", "zero_one"],
}


def batch_input(rng, q, n, frac, ties):
    scores = rng.integers(0, 4, (q, n)).astype(float) if ties else rng.normal(size=(q, n))
    labels = rng.random((q, n)) < frac
    labels[0] = False  # no positive
    labels[1] = True  # no negative
    labels[2, :] = False
    labels[2, 0] = True  # a single positive
    return scores, labels


def check_rows(res, scores, labels, loss, method):
    """Every valid row is lai's result (ranks and coefficients exactly); skipped rows zero."""
    for q in range(scores.shape[0]):
        pos = labels[q]
        if pos.all() or not pos.any():
            assert not res.valid[q]
            assert res.loss[q] == res.objective[q] == res.ground_truth_F[q] == 0.0
            assert not res.coef[q].any() and not res.rank[q].any()
            continue
        assert res.valid[q]
        ref = lai(scores[q], pos, loss, method)
        assert res.objective[q] == pytest.approx(ref.objective, rel=1e-12, abs=1e-14)
        assert res.loss[q] == pytest.approx(ref.loss, rel=1e-12, abs=1e-14)
        assert res.ground_truth_F[q] == ref.ground_truth_F
        np.testing.assert_array_equal(res.coef[q], ref.coef)
        if loss != "01":
            np.testing.assert_array_equal(res.rank[q][~pos], ref.neg_rank)
        assert not res.rank[q][pos].any()


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("loss,method", [(lo, m) for lo, ms in METHODS_OF.items() for m in ms])
def test_batch_is_lai_row_by_row(loss, method, ties):
    rng = np.random.default_rng(7)
    n = 6 if method == "brute" else 300
    scores, labels = batch_input(rng, 6, n, 0.3, ties)
    check_rows(lai_batch(scores, labels, loss, method), scores, labels, loss, method)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_large_batches_on_threads_and_the_unsorted_default(loss, monkeypatch):
    """Rows large enough for "auto" to pick the bucket method, in a batch run on threads,
    mixed with small rows of the sorting method."""
    rng = np.random.default_rng(8)
    n = 10_000
    scores, labels = batch_input(rng, 7, n, 0.01, False)
    labels[5] = rng.random(n) < 0.3  # many positives: bucket_sort in the same batch
    monkeypatch.setattr(batch, "THREADED_MIN", scores.size)
    check_rows(lai_batch(scores, labels, loss), scores, labels, loss, "auto")


@pytest.mark.parametrize("loss", ["ap", "ndcg", "01"])
def test_gradient_is_coef_minus_ground_truth_coef(loss):
    rng = np.random.default_rng(9)
    scores, labels = batch_input(rng, 5, 40, 0.3, False)
    res = lai_batch(scores, labels, loss)
    grad = lai_batch(scores, labels, loss, gradient=True)
    for q in np.flatnonzero(res.valid):
        np.testing.assert_allclose(
            grad.coef[q], res.coef[q] - ground_truth_coef(labels[q], loss), rtol=0, atol=1e-15
        )
    np.testing.assert_array_equal(grad.hinge, res.objective - res.ground_truth_F)


def test_label_encodings_give_one_result():
    rng = np.random.default_rng(10)
    scores, labels = batch_input(rng, 4, 30, 0.4, False)
    ref = lai_batch(scores, labels)
    for enc in (labels.astype(np.int8), labels.astype(float), np.where(labels, 1, -1)):
        np.testing.assert_array_equal(lai_batch(scores, enc).coef, ref.coef)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"scores": np.zeros(4)}, "2-D array"),
        ({"scores": np.zeros((2, 2, 2))}, "2-D array"),
        ({"scores": np.array([[0.0, np.nan], [1.0, 2.0]])}, "finite.*query 0, sample 1"),
        ({"scores": np.array([["a", "b"], ["c", "d"]])}, "numeric"),
        ({"labels": np.array([[1, 0], [0, 2]])}, "binary.*at query 1, sample 1"),
        ({"labels": np.array([[1, 0, 1], [0, 1, 0]])}, "same shape"),
        ({"labels": np.array([["a", "b"], ["c", "d"]])}, "bool or numeric"),
        ({"loss": "bogus"}, "lai_batch takes loss"),
        ({"method": "bogus"}, "Unknown method"),
        ({"loss": "ndcg", "method": "yue"}, "does not support"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(kwargs, message):
    args = {"scores": np.array([[0.0, 1.0], [2.0, 3.0]]), "labels": np.array([[1, 0], [0, 1]])}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        lai_batch(**args)


def test_import_qs_never_imports_torch():
    code = (
        "import sys, qs, qs.inference, qs.inference.batch, qs.estimators, qs.ssvm; "
        "sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("method", ["auto", "qs", "zero_one"])
def test_non_finite_score_in_a_skipped_row_is_refused(method):
    scores, labels = np.zeros((3, 4)), np.array([[1, 0, 0, 1], [1, 1, 1, 1], [0, 1, 0, 0]])
    scores[1, 2] = np.inf
    loss = "01" if method == "zero_one" else "ap"
    with pytest.raises(ValueError, match="finite; got inf at query 1, sample 2"):
        lai_batch(scores, labels, loss, method)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("loss", ["ap", "ndcg", "01"])
def test_long_rows_through_lai_are_lai_row_by_row(loss, dtype, monkeypatch):
    """Rows of LAI_ROW_MIN samples or more are solved by lai one by one (its threads within
    the row), skipped rows and the gradient as in the kernel."""
    rng = np.random.default_rng(17)
    scores, labels = batch_input(rng, 5, 2000, 0.05, False)
    scores = scores.astype(dtype)
    monkeypatch.setattr(batch, "LAI_ROW_MIN", 2000)
    res = lai_batch(scores, labels, loss)
    check_rows(res, scores.astype(np.float64), labels, loss, "auto")
    grad = lai_batch(scores, labels, loss, gradient=True, ranks=False, coef_dtype=dtype)
    monkeypatch.undo()
    ref = lai_batch(scores, labels, loss, gradient=True, coef_dtype=dtype)
    assert grad.rank is None
    np.testing.assert_array_equal(grad.coef, ref.coef)
    np.testing.assert_allclose(grad.hinge, ref.hinge, rtol=1e-12, atol=1e-15)
    scores[1, 7] = np.nan  # a skipped row
    with pytest.raises(ValueError, match="finite; got nan at query 1, sample 7"):
        monkeypatch.setattr(batch, "LAI_ROW_MIN", 2000)
        lai_batch(scores, labels, loss)
    scores[1, 7] = 0.0
    scores[3, 11] = -np.inf
    with pytest.raises(ValueError, match="finite; got -inf at query 3, sample 11"):
        lai_batch(scores, labels, loss)


def test_bad_coef_dtype_is_refused():
    with pytest.raises(ValueError, match="coef_dtype must be float64 or float32"):
        lai_batch(np.zeros((1, 2)), np.array([[1, 0]]), coef_dtype=np.int32)


def test_a_bad_lead_is_refused():
    scores, labels = np.zeros((2, 3)), np.array([[1, 0, 0], [0, 1, 0]])
    with pytest.raises(ValueError, match="lead must be a pair"):
        lai_batch(scores, labels, lead=np.zeros((2, 1)))
    with pytest.raises(ValueError, match=r"one row per query \(2\); got shape \(3, 1\)"):
        lai_batch(scores, labels, lead=(np.zeros((3, 1)), np.zeros((3, 1))))
    with pytest.raises(ValueError, match="same shape"):
        lai_batch(scores, labels, lead=(np.zeros((2, 1)), np.zeros((2, 2))))


@pytest.mark.parametrize("loss", ["ap", "ndcg", "01"])
def test_rows_solved_in_the_output_are_the_rows_solved_apart(loss, monkeypatch):
    """float64 coefficients are solved in the output row itself (no pass after when there is
    no gradient and no rank to write): the same as float32 output widened back where exact,
    and as the call with ranks, on the kernel's routes and through lai."""
    rng = np.random.default_rng(19)
    scores, labels = batch_input(rng, 5, 20_000, 0.01, False)
    scores[3, :256] += 0.5
    labels[4] = rng.random(20_000) < 0.2
    with_ranks = lai_batch(scores, labels, loss)
    for row_min in (batch.LAI_ROW_MIN, 20_000):
        monkeypatch.setattr(batch, "LAI_ROW_MIN", row_min)
        for gradient in (False, True):
            bare = lai_batch(scores, labels, loss, gradient=gradient, ranks=False)
            ref = lai_batch(scores, labels, loss, gradient=gradient)
            np.testing.assert_array_equal(bare.coef, ref.coef)
            np.testing.assert_array_equal(bare.hinge, ref.hinge)
        np.testing.assert_array_equal(
            lai_batch(scores, labels, loss, ranks=False).coef, with_ranks.coef
        )
