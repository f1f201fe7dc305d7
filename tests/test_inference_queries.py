"""lai_queries: ragged queries in one call, query by query the result of lai."""

import threading

import numpy as np
import pytest

from qs.inference import _batch_rows, lai, lai_queries, queries
from tests import naive

METHODS_OF = {
    "ap": ["auto", "qs", "yue", "search", "sort_dc", "bucket", "bucket_sort"],
    "ndcg": ["auto", "qs", "chakrabarti", "sort_dc", "bucket", "bucket_sort"],
}


def ragged_input(rng, sizes, frac, ties, dtype=np.float64):
    """Queries of the given sizes, scores with ties or not, and some queries without a
    relevant or without a non-relevant document."""
    n = int(sum(sizes))
    scores = (rng.integers(0, 4, n) if ties else rng.normal(size=n)).astype(dtype)
    labels = rng.random(n) < frac
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return scores, labels, offsets


def check_queries(res, scores, labels, offsets, loss, method, gradient=False):
    """Every valid query is lai's result (ranks and coefficients exactly); skipped ones zero."""
    assert res.valid.size == offsets.size - 1
    for q in range(offsets.size - 1):
        a, b = offsets[q], offsets[q + 1]
        pos = labels[a:b]
        if pos.all() or not pos.any():
            assert not res.valid[q]
            assert res.loss[q] == res.objective[q] == res.ground_truth_F[q] == 0.0
            assert not res.coef[a:b].any() and not res.rank[a:b].any()
            continue
        assert res.valid[q]
        ref = lai(scores[a:b].astype(np.float64), pos, loss, method)
        assert res.objective[q] == pytest.approx(ref.objective, rel=1e-12, abs=1e-14)
        assert res.loss[q] == pytest.approx(ref.loss, rel=1e-12, abs=1e-14)
        assert res.ground_truth_F[q] == ref.ground_truth_F
        truth = np.where(pos, 1.0 / pos.sum(), -1.0 / (~pos).sum()) if gradient else 0.0
        np.testing.assert_array_equal(res.coef[a:b], ref.coef - truth)
        np.testing.assert_array_equal(res.rank[a:b][~pos], ref.neg_rank)
        assert not res.rank[a:b][pos].any()


#: sizes from 0 and 1 document (always skipped) up to a few hundred, in no order
SIZES = [1, 7, 0, 120, 2, 300, 1, 33, 5, 64, 250, 3, 17]


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("loss,method", [(lo, m) for lo, ms in METHODS_OF.items() for m in ms])
def test_queries_are_lai_query_by_query(loss, method, ties):
    rng = np.random.default_rng(3)
    scores, labels, offsets = ragged_input(rng, SIZES, 0.35, ties)
    labels[offsets[3] : offsets[4]] = False  # a long query with no relevant document
    res = lai_queries(scores, labels, offsets, loss=loss, method=method)
    check_queries(res, scores, labels, offsets, loss, method)
    assert not res.valid[[0, 2, 3, 6]].any()


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_brute_oracle_agrees_with_exhaustive_enumeration(loss):
    """Small queries with ties: the objective is the best over every ordering (the naive
    enumeration, which never imports the library), and auto's objective equals it."""
    rng = np.random.default_rng(11)
    sizes = [2, 3, 4, 5, 6, 1, 6, 4]
    scores, labels, offsets = ragged_input(rng, sizes, 0.5, ties=True)
    fast = lai_queries(scores, labels, offsets, loss=loss)
    brute = lai_queries(scores, labels, offsets, loss=loss, method="brute")
    check_queries(brute, scores, labels, offsets, loss, "brute")
    assert fast.valid.sum() >= 5
    for q in np.flatnonzero(fast.valid):
        a, b = offsets[q], offsets[q + 1]
        best = naive.best_objective(scores[a:b], labels[a:b], loss)
        assert fast.objective[q] == pytest.approx(best, rel=1e-12, abs=1e-14)
        assert brute.objective[q] == pytest.approx(best, rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_gradient_and_float32(loss):
    """float32 scores are solved as their float64 copy; the gradient subtracts coef(R*); a
    float32 output is the float64 one rounded."""
    rng = np.random.default_rng(5)
    scores, labels, offsets = ragged_input(rng, SIZES, 0.3, False, dtype=np.float32)
    res = lai_queries(scores, labels, offsets, loss=loss, gradient=True)
    check_queries(res, scores, labels, offsets, loss, "auto", gradient=True)
    res32 = lai_queries(
        scores, labels, offsets, loss=loss, gradient=True, ranks=False, coef_dtype=np.float32
    )
    assert res32.rank is None and res32.coef.dtype == np.float32
    np.testing.assert_array_equal(res32.coef, res.coef.astype(np.float32))
    # summed on its own (qs.inference._hinge): the difference to rounding at this spread
    np.testing.assert_allclose(
        res.hinge, res.objective - res.ground_truth_F, rtol=1e-12, atol=1e-15
    )


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_training_pass_of_letor_shaped_queries(loss, ties):
    """Queries of about a hundred documents, half of them relevant, float32 scores, as a
    training pass gives them: the small route sorts the positives by buckets as it does the
    negatives (an outlier's range sends a query's positives, and another's negatives, to
    the merge sort) and writes the gradient and ranks as it solves; exact as lai."""
    rng = np.random.default_rng(13)
    sizes = rng.integers(80, 160, 30)
    scores, labels, offsets = ragged_input(rng, sizes, 0.5, ties, dtype=np.float32)
    scores[offsets[4]], labels[offsets[4]] = 1e30, True
    scores[offsets[7]], labels[offsets[7]] = -1e30, False
    res = lai_queries(scores, labels, offsets, loss=loss, gradient=True)
    check_queries(res, scores, labels, offsets, loss, "auto", gradient=True)
    assert res.valid.all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_small_route_around_its_positives_sort(loss, dtype):
    """Queries of one to a few hundred documents by the small route, with a number of
    relevant documents on either side of the positives placed by counting and those sorted
    by buckets (16), none, all, one, a single non-relevant document, all scores tied, ties
    between relevant and non-relevant documents; gradient, ranks and float32 coefficients
    exactly as lai's; and a query of more relevant documents than one histogram takes
    (sorted by coarse buckets first)."""
    from qs.inference._batch_small import FEW_POSITIVES_MAX, SMALL_ROW_MAX

    rng = np.random.default_rng(21)
    few = FEW_POSITIVES_MAX
    n_pos = [1, few - 1, few, few + 1, few + 2, 0, 5, 1, 60, 250, 3, 40, 1, SMALL_ROW_MAX]
    sizes = [1, 40, 40, 40, 41, 30, 5, 2, 118, 519, 4, 80, 1, SMALL_ROW_MAX + 300]
    sizes[6] = n_pos[6]  # all relevant
    sizes[10] = n_pos[10] + 1  # one non-relevant document
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    labels = np.zeros(offsets[-1], dtype=bool)
    for q, p in enumerate(n_pos):
        labels[offsets[q] + rng.permutation(sizes[q])[:p]] = True
    scores = np.round(rng.normal(size=offsets[-1]), 1).astype(dtype)  # ties across labels
    scores[offsets[11] : offsets[12]] = 0.5  # every score tied
    for gradient in (False, True):
        res = lai_queries(scores, labels, offsets, loss=loss, gradient=gradient)
        check_queries(res, scores, labels, offsets, loss, "auto", gradient=gradient)
        res32 = lai_queries(
            scores, labels, offsets, loss=loss, gradient=gradient, coef_dtype=np.float32
        )
        np.testing.assert_array_equal(res32.coef, res.coef.astype(np.float32))
        np.testing.assert_array_equal(res32.rank, res.rank)
    assert res.valid.tolist() == [p not in (0, s) for p, s in zip(n_pos, sizes, strict=True)]


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_large_queries_and_threads(loss, monkeypatch):
    """Queries long enough for "auto" to take the bucket method, and others of many relevant
    documents beside few non-relevant ones (the small route with more documents than its
    held work arrays), run on threads in blocks of queries."""
    monkeypatch.setattr(queries, "THREADED_MIN", 1000)
    monkeypatch.setattr(_batch_rows, "SMALL_HELD_MAX", 64)
    monkeypatch.setattr(_batch_rows, "_held", threading.local())  # none held from before
    rng = np.random.default_rng(9)
    sizes = [40_000, 50, 3000, 900, 20_000, 8]
    scores, labels, offsets = ragged_input(rng, sizes, 0.02, False)
    labels[offsets[2] : offsets[3]] = rng.random(3000) < 0.97  # few non-relevant
    res = lai_queries(scores, labels, offsets, loss=loss)
    check_queries(res, scores, labels, offsets, loss, "auto")


def test_labels_of_any_encoding_give_one_result():
    rng = np.random.default_rng(1)
    scores, labels, offsets = ragged_input(rng, SIZES, 0.4, False)
    ref = lai_queries(scores, labels, offsets)
    for enc in (labels.astype(int), np.where(labels, 1, -1), labels.astype(np.float32)):
        res = lai_queries(scores, enc, list(offsets))
        np.testing.assert_array_equal(res.coef, ref.coef)
        np.testing.assert_array_equal(res.objective, ref.objective)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"offsets": [0, 2]}, "end at the number of documents"),
        ({"offsets": [1, 4]}, "start at 0"),
        ({"offsets": [0, 3, 2, 4]}, "non-decreasing; got 3 then 2 at entries 1 and 2"),
        ({"offsets": [0]}, "n_queries \\+ 1 >= 2"),
        ({"offsets": [0.0, 4.0]}, "offsets must be integers"),
        ({"scores": np.zeros((2, 2))}, "1-D array"),
        ({"scores": np.array(["a", "b", "c", "d"])}, "numeric"),
        ({"labels": [1, 0, 2, 0]}, "binary"),
        ({"labels": [1, 0, 1]}, "same length"),
        ({"loss": "01"}, "lai_queries takes loss"),
        ({"method": "bogus"}, "Unknown method"),
        ({"loss": "ndcg", "method": "yue"}, "does not support"),
        ({"coef_dtype": np.int32}, "coef_dtype"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(kwargs, message):
    args = {
        "scores": np.array([0.0, 1.0, 2.0, 3.0]),
        "labels": np.array([1, 0, 0, 1]),
        "offsets": np.array([0, 2, 4]),
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        lai_queries(args.pop("scores"), args.pop("labels"), args.pop("offsets"), **args)


@pytest.mark.parametrize("method", ["auto", "qs", "bucket", "brute"])
def test_non_finite_score_is_named_even_in_a_skipped_query(method):
    scores, labels = np.zeros(7), np.array([1, 0, 1, 1, 1, 0, 1])
    scores[3] = np.nan  # query 1 (documents 2..4) has no non-relevant document
    with pytest.raises(ValueError, match="finite; got nan at index 3 \\(query 1, document 1\\)"):
        lai_queries(scores, labels, [0, 2, 5, 7], method=method)
