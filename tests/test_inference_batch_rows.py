"""The compiled loop over lai_batch's rows (qs/inference/_batch_rows.py): its method table,
rows read in their dtype, leads, and the gradient written as the bucket rows are solved."""

import numpy as np
import pytest

from qs.inference import METHODS, batch, lai
from qs.inference._batch_rows import ROW_METHODS
from qs.inference.batch import lai_batch
from qs.ssvm import ground_truth_coef
from tests.test_inference_batch import METHODS_OF, batch_input


def test_every_method_has_a_batch_solver():
    assert set(ROW_METHODS) | {"brute"} == set(METHODS)
    assert {m for ms in METHODS_OF.values() for m in ms} == set(METHODS)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize(
    "loss,method",
    [
        ("ap", "auto"),
        ("ndcg", "auto"),
        ("01", "auto"),
        ("ap", "bucket"),
        ("ap", "qs"),
        ("ndcg", "sort_dc"),
    ],
)
def test_float32_scores_are_their_float64_copy(loss, method, ties):
    """float32 scores (read in place, widened row by row) give exactly the result of their
    float64 copy, on small rows, rows the default solves by its per-query kernels, and rows
    of both routes in one call; coef in float32 is the float64 coef rounded, and ranks=False
    leaves the rest unchanged."""
    rng = np.random.default_rng(16)
    scores, labels = batch_input(rng, 5, 20_000, 0.01, ties)
    scores[3, :256] += 0.5  # a row the default sorts beside rows it buckets
    labels[4] = rng.random(20_000) < 0.2
    if ties:
        scores = np.round(scores * 8) / 8
    s32 = scores.astype(np.float32)
    ref = lai_batch(s32.astype(np.float64), labels, loss, method, gradient=True)
    res = lai_batch(s32, labels, loss, method, gradient=True)
    for field in batch.BatchResult._fields:
        np.testing.assert_array_equal(getattr(res, field), getattr(ref, field))
    low = lai_batch(s32, labels, loss, method, gradient=True, ranks=False, coef_dtype=np.float32)
    assert low.rank is None and low.coef.dtype == np.float32
    np.testing.assert_array_equal(low.coef, ref.coef.astype(np.float32))
    np.testing.assert_array_equal(low.hinge, ref.hinge)
    np.testing.assert_array_equal(low.valid, ref.valid)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "loss,method",
    [
        ("ap", "auto"),
        ("ndcg", "auto"),
        ("01", "auto"),
        ("ap", "bucket"),
        ("ndcg", "qs"),
        ("ap", "brute"),
    ],
)
def test_a_lead_is_the_call_on_the_joined_rows(loss, method, dtype, monkeypatch):
    """Rows given as a lead and the rest (a memory bank's batch part, then the bank) give
    exactly the result of the joined rows: small rows, rows the default buckets, ties, a row
    whose positives are all in the lead, rows through lai, and a non-finite score located in
    the joined row."""
    rng = np.random.default_rng(18)
    n, k = (6, 2) if method == "brute" else (20_000, 63)
    scores, labels = batch_input(rng, 5, n, 0.01, False)
    scores[3] = np.round(scores[3] * 4) / 4  # ties, across the lead and the rest
    labels[4, :k], labels[4, k:] = True, False
    scores = scores.astype(dtype)
    ref = lai_batch(scores, labels, loss, method, gradient=True)
    res = lai_batch(
        scores[:, k:],
        labels[:, k:],
        loss,
        method,
        gradient=True,
        lead=(scores[:, :k], labels[:, :k]),
    )
    for field in batch.BatchResult._fields:
        np.testing.assert_array_equal(getattr(res, field), getattr(ref, field))
    if method == "brute":
        return
    monkeypatch.setattr(batch, "LAI_ROW_MIN", n)
    by_lai = lai_batch(
        scores[:, k:],
        labels[:, k:],
        loss,
        method,
        gradient=True,
        lead=(scores[:, :k], labels[:, :k]),
    )
    np.testing.assert_array_equal(by_lai.coef, ref.coef)
    np.testing.assert_array_equal(by_lai.rank, ref.rank)
    for at, where in ((1, 3), (2, k + 5)):  # a skipped row; a row solved
        bad = scores.copy()
        bad[at, where] = np.nan
        for row_min in (n, batch.LAI_ROW_MIN * 4):
            monkeypatch.setattr(batch, "LAI_ROW_MIN", row_min)
            with pytest.raises(ValueError, match=f"got nan at query {at}, sample {where}"):
                lai_batch(bad[:, k:], labels[:, k:], loss, method, lead=(bad[:, :k], labels[:, :k]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "loss,method", [("ap", "auto"), ("ndcg", "auto"), ("ap", "bucket"), ("ndcg", "bucket")]
)
def test_bucket_rows_write_the_gradient_as_they_are_solved(loss, method, dtype):
    """Rows the bucket method solves write coef(R_bar) - coef(R*) into the output as they are
    solved (with a lead, read in the scores' dtype): lai's coefficients less 1/P and -1/N,
    rounded once to the output dtype, with lai's ranks and hinge; a second call that reuses
    the held work arrays gives the same."""
    rng = np.random.default_rng(20)
    n, k = 20_000, 63
    scores, labels = batch_input(rng, 4, n, 0.005, False)
    scores[3] = np.round(scores[3] * 8) / 8  # ties
    scores = scores.astype(dtype)
    for _ in range(2):
        res = lai_batch(
            scores[:, k:],
            labels[:, k:],
            loss,
            method,
            gradient=True,
            coef_dtype=dtype,
            lead=(scores[:, :k], labels[:, :k]),
        )
        for q in (2, 3):
            ref = lai(scores[q].astype(np.float64), labels[q], loss, method)
            want = ref.coef - ground_truth_coef(labels[q], loss)
            assert res.coef.dtype == dtype
            np.testing.assert_array_equal(res.coef[q], want.astype(dtype))
            np.testing.assert_array_equal(res.rank[q][~labels[q]], ref.neg_rank)
            assert res.hinge[q] == pytest.approx(
                ref.objective - ref.ground_truth_F, rel=1e-12, abs=1e-15
            )
        assert not res.valid[:2].any() and not res.coef[:2].any()
