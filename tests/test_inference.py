"""LAI methods against exhaustive enumeration, against each other, and on bad input."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qs.inference import METHODS, Workspace, lai
from qs.inference.bucket import _bucket_chunked
from qs.losses import NDCGLoss, QSLoss, get_loss
from tests import naive

RANKING = {"ap": ["qs", "yue", "search", "sort_dc", "bucket", "bucket_sort", "auto"],
           "ndcg": ["qs", "chakrabarti", "sort_dc", "bucket", "bucket_sort", "auto"]}
CASES = [(loss, m) for loss, ms in RANKING.items() for m in ms]


def check_result(res, scores, labels):
    """Invariants every ranking LAI result satisfies."""
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = labels.sum(), (~labels).sum()
    # summation error grows with the magnitude of the terms, not of their (cancelling) sum
    scale = np.abs(res.coef * scores).sum()
    assert res.objective == pytest.approx(res.loss + res.coef @ scores, rel=1e-12, abs=1e-11 * scale)
    truth = scores[labels].mean() - scores[~labels].mean()
    # means of scores that cancel: the error scales with the scores' magnitude
    assert res.ground_truth_F == pytest.approx(truth, rel=1e-12, abs=1e-10 * np.abs(scores).max())
    assert res.neg_rank.shape == (n_neg,) and res.neg_rank.dtype == np.int32
    assert res.neg_rank.min() >= 1 and res.neg_rank.max() <= n_pos + 1
    # negative coefficients follow from their ranks
    np.testing.assert_allclose(res.coef[~labels], (n_pos + 2 - 2 * res.neg_rank) / (n_pos * n_neg))


def all_inputs(max_total, rng, ties):
    """One random input per (P, N) with P + N <= max_total."""
    for total in range(2, max_total + 1):
        for n_pos in range(1, total):
            scores = rng.integers(0, 3, total).astype(float) if ties else rng.normal(size=total)
            labels = np.zeros(total, dtype=bool)
            labels[rng.choice(total, n_pos, replace=False)] = True
            yield scores, labels


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_brute_is_the_optimum_over_all_orderings(loss, ties):
    rng = np.random.default_rng(1)
    for scores, labels in all_inputs(6, rng, ties):
        res = lai(scores, labels, loss, "brute")
        assert res.objective == pytest.approx(naive.best_objective(scores, labels, loss), rel=1e-12)
        check_result(res, scores, labels)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("loss,method", CASES)
def test_every_small_size_matches_brute(loss, method, ties):
    rng = np.random.default_rng(2 + ties)
    for scores, labels in all_inputs(10, rng, ties):
        ref = lai(scores, labels, loss, "brute")
        res = lai(scores, labels, loss, method)
        assert res.objective == pytest.approx(ref.objective, rel=1e-12, abs=1e-15)
        assert res.loss == pytest.approx(ref.loss, rel=1e-12, abs=1e-15)
        if not ties:
            np.testing.assert_array_equal(res.neg_rank, ref.neg_rank)
        check_result(res, scores, labels)


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(-3, 3), st.booleans()), min_size=2, max_size=9).filter(
        lambda d: 0 < sum(b for _, b in d) < len(d)
    ),
    scale=st.sampled_from([1.0, 0.25, 1e-3]),
)
def test_property_fast_methods_match_brute(data, scale):
    scores = np.array([s for s, _ in data]) * scale
    labels = np.array([b for _, b in data])
    for loss, methods in RANKING.items():
        ref = lai(scores, labels, loss, "brute")
        first = None
        for method in methods:
            res = lai(scores, labels, loss, method)
            assert res.objective == pytest.approx(ref.objective, rel=1e-12, abs=1e-15)
            check_result(res, scores, labels)
            # with ties too, the fast methods share one tie rule and agree on every rank
            if first is None:
                first = res.neg_rank
            np.testing.assert_array_equal(res.neg_rank, first)


def large_inputs():
    rng = np.random.default_rng(7)
    n = 200_000
    yield "normal", rng.normal(size=n), rng.random(n) < 0.01
    yield "separated", np.r_[rng.normal(1, 1, 500), rng.normal(0, 1, n)], np.r_[np.ones(500), np.zeros(n)]
    yield "integer ties", rng.integers(0, 50, n).astype(float), rng.random(n) < 0.02
    heavy = rng.standard_cauchy(n)
    heavy[0] = 1e12
    yield "heavy tail with outlier", heavy, rng.random(n) < 0.005
    yield "all equal", np.zeros(5000), np.arange(5000) % 7 == 0
    extreme = np.r_[np.full(3000, 1e300), np.full(3000, -1e300), rng.normal(size=3000)]
    yield "extreme magnitudes", extreme, np.arange(9000) % 10 == 0
    wide = rng.normal(size=5000)
    wide[[10, 20]] = 1e308, -1e308  # negatives whose score range overflows
    yield "overflowing range", wide, np.arange(5000) % 10 == 3
    yield "tiny range", 1.0 + 1e-15 * rng.integers(0, 5, n), rng.random(n) < 0.01
    # in input order: fixed pivot places once split these badly at every level
    m = 20_000
    ordered = np.sort(rng.normal(size=m))
    labels = rng.random(m) < 0.01
    yield "ascending", ordered, labels
    yield "descending", ordered[::-1].copy(), labels
    yield "organ pipe", np.r_[ordered[::2], ordered[1::2][::-1]], labels
    # many positives: the positives sorted by buckets, AP's monotone sweep past place P
    many = 50_000
    for share in (0.05, 0.2, 0.5):
        yield f"{share:g} positives", rng.normal(size=many), rng.random(many) < share
        yield f"{share:g} positives, ties", rng.integers(0, 40, many).astype(float), \
            rng.random(many) < share
    yield "more positives than negatives", rng.normal(size=many), rng.random(many) < 0.7


@pytest.mark.parametrize("name,scores,labels", list(large_inputs()), ids=lambda x: x if isinstance(x, str) else "")
@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_exact_methods_agree_on_large_inputs(name, scores, labels, loss):
    methods = RANKING[loss]
    results = {m: lai(scores, labels, loss, m) for m in methods}
    ref = results[methods[0]]
    scale = np.abs(ref.coef * scores).sum()  # summation order changes the last bits
    for m, res in results.items():
        np.testing.assert_array_equal(res.neg_rank, ref.neg_rank, err_msg=m)
        np.testing.assert_array_equal(res.coef, ref.coef, err_msg=m)
        assert res.objective == pytest.approx(ref.objective, rel=1e-12, abs=1e-11 * scale)
    check_result(ref, scores, labels)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_million_negatives_identical_ranks(loss):
    rng = np.random.default_rng(11)
    n_neg, n_pos = 1_000_000, 30
    scores = np.r_[rng.normal(0.5, 1, n_pos), rng.normal(0, 1, n_neg)]
    labels = np.r_[np.ones(n_pos, bool), np.zeros(n_neg, bool)]
    methods = RANKING[loss]
    ref = lai(scores, labels, loss, methods[0]).neg_rank
    for m in methods[1:]:
        np.testing.assert_array_equal(lai(scores, labels, loss, m).neg_rank, ref, err_msg=m)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
@pytest.mark.parametrize("n_chunks", [2, 3, 8])
def test_bucket_in_pieces_matches_one_piece(loss, n_chunks):
    """The threaded path of the default method (used from THREADED_MIN samples on), forced
    on small inputs with ties: identical ranks and coefficients, and the first bad score."""
    rng = np.random.default_rng(n_chunks)
    n, n_pos = 30_000, 300
    for scores in (rng.normal(size=n), rng.integers(0, 40, n).astype(float)):
        labels = np.zeros(n, dtype=np.uint8)
        labels[rng.choice(n, n_pos, replace=False)] = 1
        ref = lai(scores, labels, loss, "qs")
        neg_rank, coef = np.empty(n - n_pos, dtype=np.int32), np.empty(n)
        out = _bucket_chunked(get_loss(loss), scores, labels, n_pos, neg_rank, coef, n_chunks)
        np.testing.assert_array_equal(neg_rank, ref.neg_rank)
        np.testing.assert_array_equal(coef, ref.coef)
        objective = get_loss(loss).value(out[4]) + out[5]
        assert objective == pytest.approx(ref.objective, rel=1e-12)
    bad = rng.normal(size=n)
    bad[[n - 5, n - 3]] = np.nan, np.inf
    err, where = _bucket_chunked(get_loss(loss), bad, labels, n_pos, neg_rank, coef, n_chunks)[:2]
    assert err != 0 and where == n - 5


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_buckets_split_on_their_step(loss, monkeypatch):
    """Straddling buckets of ranks r, r+1 settle the members whose step does not depend on
    their place in the pass, and gather the rest: inputs small enough that the loss term
    makes the band of place-dependent scores wide, with ties; the split must have happened
    (some bucket partly settled, partly gathered) and agree with sort_dc. Through the
    threaded path, whose steps are Python calls that can be watched."""
    import qs.inference.bucket as bucket

    partial, compact = [], bucket._compact

    def spy(starts, *args):
        n_live = compact(starts, *args)
        partial.append(np.any((n_live > 0) & (n_live < np.diff(starts))))
        return n_live

    monkeypatch.setattr(bucket, "_compact", spy)
    rng = np.random.default_rng(5)
    for _ in range(40):
        n_pos, n_neg = rng.integers(1, 40), rng.integers(20, 3000)
        scores = np.round(rng.normal(size=n_pos + n_neg), rng.integers(1, 4))
        labels = np.r_[np.ones(n_pos, np.uint8), np.zeros(n_neg, np.uint8)]
        ref = lai(scores, labels, loss, "sort_dc")
        neg_rank, coef = np.empty(n_neg, dtype=np.int32), np.empty(n_pos + n_neg)
        _bucket_chunked(get_loss(loss), scores, labels, n_pos, neg_rank, coef, 3)
        np.testing.assert_array_equal(neg_rank, ref.neg_rank)
        np.testing.assert_array_equal(coef, ref.coef)
    assert sum(partial) >= 5


def test_ties_among_negatives_follow_input_order():
    # one positive between equal negatives: the earlier negatives are ranked higher
    scores = np.array([0.0, 0.0, 0.0, 0.0, 0.0])
    labels = np.array([0, 1, 0, 0, 0])
    for method in RANKING["ap"]:
        ranks = lai(scores, labels, "ap", method).neg_rank
        assert np.all(np.diff(ranks) >= 0), method


def exact_ap_objective(scores, labels, neg_rank):
    """Delta + F of an interleaving in rational arithmetic: 1 - AP from the negatives above
    each positive, F = (1/PN) sum_{x, y} (+-1)(s_x - s_y) with x above y when y's rank > x's
    place among the positives (by descending score)."""
    pos = sorted((Fraction(s) for s, y in zip(scores, labels) if y), reverse=True)
    neg = [Fraction(s) for s, y in zip(scores, labels) if not y]
    n_pos, n_neg = len(pos), len(neg)
    above = [sum(r <= k for r in neg_rank) for k in range(1, n_pos + 1)]
    loss = 1 - sum(Fraction(k, k + n) for k, n in enumerate(above, 1)) / n_pos
    f = sum((1 if r > k else -1) * (x - y) for k, x in enumerate(pos, 1)
            for y, r in zip(neg, neg_rank)) / (n_pos * n_neg)
    return loss + f


def test_exact_rational_ties_are_decided_in_floating_point():
    """The documented tie rule: the largest maximiser of each negative's objective *as
    evaluated in floating point*. Negative -0.75 (place 4) gains exactly 0 in rational
    arithmetic by moving below the positive -0.625 (2 * 0.125 / 5 - 1/20), so ranks 1 and 2
    tie; the rounded step is negative and every method keeps rank 1. The ranking is still an
    exact optimum."""
    scores = np.array([0.125, -0.625, -0.25, -0.75, -1.0, 0.25])
    labels = np.array([0, 1, 0, 0, 0, 0])
    best = max(exact_ap_objective(scores, labels, r)
               for r in itertools.product([1, 2], repeat=5))
    for method in RANKING["ap"]:
        res = lai(scores, labels, "ap", method)
        np.testing.assert_array_equal(res.neg_rank, [1, 1, 1, 2, 1], err_msg=method)
        assert exact_ap_objective(scores, labels, res.neg_rank) == best
        assert exact_ap_objective(scores, labels, [1, 1, 2, 2, 1]) == best  # the other maximiser


# the example: the objective is 223/360 and the ranks [4, 3, 1] at every offset
OFFSET_SCORES = np.array([0.5, 0.0, 0.25, 0.125, 0.375, 0.625])
OFFSET_LABELS = np.array([1, 0, 1, 0, 0, 1])


@pytest.mark.parametrize("offset", [0.0, 1e9, 1e12, 1e15, -1e15])
@pytest.mark.parametrize("method", RANKING["ap"] + ["brute"])
def test_objective_is_exact_at_any_offset(method, offset):
    scores = OFFSET_SCORES + offset
    assert np.array_equal(scores - offset, OFFSET_SCORES)  # the shifted scores are exact
    res = lai(scores, OFFSET_LABELS, "ap", method)
    assert res.objective == pytest.approx(223 / 360, rel=1e-15)
    assert res.ground_truth_F == pytest.approx(0.875 / 3, rel=1e-15)
    np.testing.assert_array_equal(res.neg_rank, [4, 3, 1])


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(-64, 64), st.booleans()), min_size=2, max_size=12).filter(
        lambda d: 0 < sum(b for _, b in d) < len(d)
    ),
    offset=st.sampled_from([1e9, -1e12, 1e15, 2.0**49, -(2.0**49)]),
    loss=st.sampled_from(["ap", "ndcg"]),
)
def test_property_a_common_offset_changes_nothing(data, offset, loss):
    """Scores k/8 shifted by offsets where they stay exact: the same ranks, and the same
    objective to a tolerance on the objective's scale (not the offset's)."""
    scores = np.array([k for k, _ in data]) / 8.0
    labels = np.array([b for _, b in data])
    ref = lai(scores, labels, loss)
    for method in ("auto", "qs", "bucket"):
        res = lai(scores + offset, labels, loss, method)
        np.testing.assert_array_equal(res.neg_rank, ref.neg_rank)
        assert res.objective == pytest.approx(ref.objective, rel=1e-13, abs=1e-13)
        assert res.ground_truth_F == pytest.approx(ref.ground_truth_F, rel=1e-13, abs=1e-13)


def test_scores_too_far_apart_to_subtract_are_refused():
    with pytest.raises(ValueError, match="overflows float64.*Rescale"):
        lai([1.7e308, -1.7e308, 0.0], [1, 0, 0])


class HarmonicNDCG(NDCGLoss):
    """A third loss as one more class: NDCG with the convex discount D(k) = 1/k."""

    name = "ndcg_harmonic"

    def discount(self, positions):
        return 1.0 / np.asarray(positions, dtype=np.float64)


@pytest.mark.parametrize("method", ["qs", "sort_dc", "bucket", "bucket_sort", "auto"])
def test_a_new_qs_suitable_loss_works_unchanged(method):
    rng = np.random.default_rng(5)
    loss = HarmonicNDCG()
    for scores, labels in all_inputs(9, rng, ties=False):
        ref = lai(scores, labels, loss, "brute")
        res = lai(scores, labels, loss, method)
        assert res.objective == pytest.approx(ref.objective, rel=1e-12)
        np.testing.assert_array_equal(res.neg_rank, ref.neg_rank)


class ChakrabartiNDCG(NDCGLoss):
    """NDCG with the discount of Chakrabarti et al.: 1 for the first two places, 1/log2(k) after."""

    name = "ndcg_chakrabarti"

    def discount(self, positions):
        k = np.asarray(positions, dtype=np.float64)
        return np.where(k <= 2, 1.0, 1.0 / np.log2(np.maximum(k, 2.0)))


def per_negative_best_ranks(loss, scores, labels):
    """Largest maximiser of each negative's objective, negatives in descending order."""
    pos = np.sort(scores[labels == 1])[::-1]
    neg = np.sort(scores[labels == 0])[::-1]
    n_pos, n_neg = pos.size, neg.size
    best = []
    for j, s in enumerate(neg, start=1):
        i = np.arange(1, n_pos + 1)
        inc = 2 * (pos - s) / (n_pos * n_neg) + loss.increment(j, i, n_pos, n_neg)
        f = np.r_[0.0, np.cumsum(inc)]
        best.append(int(np.flatnonzero(f == f.max())[-1]) + 1)
    return best


def test_chakrabarti_discount_breaks_the_greedy():
    """Mohapatra et al., CVPR 2018, supplementary Remark 1: negatives 3e and e, a positive 5e."""
    eps = 1e-3
    scores = np.array([3 * eps, eps, 5 * eps])
    labels = np.array([0, 0, 1])
    # with the non-convex discount the per-negative optima are not monotone in j ...
    assert per_negative_best_ranks(ChakrabartiNDCG(), scores, labels) == [2, 1]
    # ... so no consistent ranking attains them; with the convex discount they are monotone
    ranks = per_negative_best_ranks(NDCGLoss(), scores, labels)
    assert ranks == sorted(ranks)
    assert ranks == list(np.sort(lai(scores, labels, "ndcg", "brute").neg_rank))


BAD = [
    (dict(scores=[0.1, np.nan, 0.3], labels=[1, 0, 0]), "finite"),
    (dict(scores=[0.1, np.inf, 0.3], labels=[1, 0, 0]), "finite"),
    (dict(scores=[0.1, 0.2, 0.3], labels=[0, 0, 0]), "no positive"),
    (dict(scores=[0.1, 0.2, 0.3], labels=[1, 1, True]), "no negative"),
    (dict(scores=[0.1, 0.2, 0.3], labels=[1, 0]), "same length"),
    (dict(scores=[0.1, 0.2, 0.3], labels=[1, 0, 2]), "binary"),
    (dict(scores=[[0.1, 0.2], [0.3, 0.4]], labels=[1, 0, 0, 0]), "1-D"),
    (dict(scores=[0.1, 0.2], labels=[1, 0], loss="map"), "Unknown loss"),
    (dict(scores=[0.1, 0.2], labels=[1, 0], method="fastest"), "Unknown method"),
    (dict(scores=[0.1, 0.2], labels=[1, 0], loss="ndcg", method="yue"), "does not support"),
    (dict(scores=[0.1, 0.2], labels=[1, 0], loss="ap", method="chakrabarti"), "does not support"),
    (dict(scores=[0.1, 0.2], labels=[1, 0], loss="ndcg", method="search"), "does not support"),
    (dict(scores=[0.1, 0.2], labels=[1, 0], loss="01", method="qs"), "does not support"),
    (dict(scores=np.zeros(40), labels=np.arange(40) % 2, method="brute"), "refuses"),
    # few assignments (10^5 + 1) but 10^10 comparisons: refused before any is allocated
    (dict(scores=np.zeros(10**5 + 1), labels=np.arange(10**5 + 1) > 0, method="brute"),
     r"refuses more than 1e\+07 values"),
    (dict(scores=[0.1, 0.2], labels=[1, 0], loss=QSLoss()), "QSLoss.. has no increment kernel"),
    (dict(scores=[0.1, 0.2], labels=[1, 0], loss=type("NoValue", (QSLoss,), {
        "kernel": staticmethod(get_loss("ap").kernel)})()), r"does not define value\(n_above\)"),
]


@pytest.mark.parametrize("encode", [
    lambda y: y, lambda y: y.astype(np.uint8), lambda y: y.astype(np.int8),
    lambda y: np.where(y, 1, -1).astype(np.int8), lambda y: np.where(y, 1.0, -1.0),
    lambda y: np.where(y, 1, 0)[::-1].copy()[::-1],  # a non-contiguous view
    lambda y: y.astype(">i8"), lambda y: np.where(y, 1.0, -1.0).astype(">f4"),
    lambda y: y.astype(np.float16),  # types numba cannot take: converted
], ids=["bool", "uint8", "int8", "int8 +-1", "float +-1", "strided", "big-endian int",
        "big-endian float", "float16"])
def test_label_encodings_give_one_result(encode):
    rng = np.random.default_rng(5)
    scores = rng.normal(size=60)
    labels = rng.random(60) < 0.3
    ref = lai(scores, labels)
    encoded = encode(labels)
    before = encoded.copy()
    res = lai(scores, encoded)
    np.testing.assert_array_equal(res.neg_rank, ref.neg_rank)
    np.testing.assert_array_equal(res.coef, ref.coef)
    np.testing.assert_array_equal(encoded, before)  # the caller's labels are left as they were


@pytest.mark.parametrize("loss,method", [("ap", "auto"), ("ndcg", "bucket"), ("ap", "qs"),
                                         ("01", "zero_one")])
def test_out_arrays_receive_the_result(loss, method, monkeypatch):
    """``out=`` gives the same result, written into the caller's arrays, call after call
    (the threaded path of the default included)."""
    import qs.inference.bucket as bucket

    monkeypatch.setattr(bucket, "THREADED_MIN", 0)
    rng = np.random.default_rng(8)
    n = 5000
    labels = rng.random(n) < 0.05
    n_neg = int((~labels).sum())
    out = (None if loss == "01" else np.full(n_neg, -7, np.int32), np.full(n, np.nan))
    for _ in range(2):
        scores = rng.normal(size=n)
        ref = lai(scores, labels, loss, method)
        res = lai(scores, labels, loss, method, out=out)
        assert res.coef is out[1] and res.neg_rank is out[0]
        np.testing.assert_array_equal(res.coef, ref.coef)
        if loss != "01":
            np.testing.assert_array_equal(res.neg_rank, ref.neg_rank)
        assert (res.loss, res.objective, res.ground_truth_F) == (ref.loss, ref.objective,
                                                                 ref.ground_truth_F)


def test_bad_out_arrays_are_refused_before_anything_is_written():
    scores, labels = np.array([0.3, 0.1, 0.2]), np.array([1, 0, 0])
    rank, coef = np.zeros(2, np.int32), np.zeros(3)
    bad = [
        ((rank,), "pair"),
        ((rank.astype(np.int64), coef), "int32"),
        ((rank, coef[:2]), r"shape \(3,\)"),
        ((rank, np.zeros(6)[::2]), "C-contiguous"),
        ((rank, np.zeros(3, np.float32)), "float64"),
        ((np.zeros(4, np.int32)[:2], np.zeros(3)), None),  # fine: a contiguous slice
        ((rank, scores), "overlap"),
    ]
    for out, message in bad:
        kept = [a.copy() for a in out]
        if message is None:
            lai(scores, labels, out=out)
            continue
        with pytest.raises(ValueError, match=message):
            lai(scores, labels, out=out)
        for a, b in zip(out, kept):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="None for the 0-1 loss"):
        lai(scores, labels, "01", out=(rank, coef))
    shared = np.zeros(8)
    with pytest.raises(ValueError, match="overlap"):
        lai(scores, labels, out=(shared[:1].view(np.int32), shared[:3]))


def test_out_arrays_must_not_overlap_the_callers_own_inputs():
    """Labels or scores that inference converts (int64 labels, float32 scores) are read from
    a copy; an ``out`` array viewing the caller's originals would overwrite them."""
    labels = np.array([1, 0, 0, 0], dtype=np.int32)
    with pytest.raises(ValueError, match="overlap"):
        lai([0.3, 0.1, 0.2, 0.0], labels, out=(labels[1:], np.zeros(4)))
    np.testing.assert_array_equal(labels, [1, 0, 0, 0])
    buffer = np.arange(8, dtype=np.float32)
    with pytest.raises(ValueError, match="overlap"):
        lai(buffer[:4], [1, 0, 0, 0], out=(np.zeros(3, np.int32), buffer.view(np.float64)))
    np.testing.assert_array_equal(buffer, np.arange(8))


def test_zero_one_leaves_out_as_it_was_on_bad_scores():
    coef = np.full(4, 7.0)
    with pytest.raises(ValueError, match="finite; got .*nan.* at index 2"):
        lai([0.5, -0.5, np.nan, 0.1], [1, 0, 0, 1], "01", out=(None, coef))
    np.testing.assert_array_equal(coef, 7.0)


@pytest.mark.parametrize("labels", [[1, 0, 2], np.array([1, 0, 2], np.int8),
                                    np.array([1, 255, 0], np.uint8), [1.0, np.nan, 0.0],
                                    [1.0, 0.5, 0.0], [1, -2, 0]])
def test_labels_outside_1_0_minus_1_are_refused(labels):
    with pytest.raises(ValueError, match="binary"):
        lai([0.1, 0.2, 0.3], labels)


@pytest.mark.parametrize("kwargs,message", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_refused_with_a_clear_message(kwargs, message):
    with pytest.raises(ValueError, match=message):
        lai(**kwargs)


def test_every_method_is_tested():
    tested = set(itertools.chain.from_iterable(RANKING.values())) | {"brute", "zero_one"}
    assert tested == set(METHODS)


def test_ap_increment_is_the_telescoped_difference():
    """Both forms of the AP increment, and the numba kernel, agree with delta_j(i+1) - delta_j(i)
    computed from the definition delta_j(i) = (1/P) sum_{k>=i} [j/(j+k) - (j-1)/(j+k-1)]."""
    from qs.losses import APLoss

    loss, n_pos = APLoss(), 7
    for j in range(1, 12):
        delta = [sum(j / (j + k) - (j - 1) / (j + k - 1) for k in range(i, n_pos + 1)) / n_pos
                 for i in range(1, n_pos + 2)]
        i = np.arange(1, n_pos + 1)
        np.testing.assert_allclose(loss.increment(j, i, n_pos, 9), np.diff(delta), rtol=1e-12)
        kernel = [loss.kernel(j, int(t), n_pos, loss.prepare(n_pos, 9)) for t in i]
        np.testing.assert_allclose(kernel, np.diff(delta), rtol=1e-12)


@pytest.mark.parametrize("seed", range(30))
def test_zero_one_is_the_most_violated_labelling(seed):
    """Against enumeration of all labellings, and its slack against scikit-learn's hinge loss."""
    from sklearn.metrics import hinge_loss

    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    scores = rng.normal(0, 1.5, n)
    labels = np.r_[True, False, rng.random(n - 2) < 0.5]
    y = np.where(labels, 1.0, -1.0)
    res = lai(scores, labels, "01")
    best = max(
        np.mean(np.array(flip) != y) + np.dot(flip, scores) / (2 * n)
        for flip in itertools.product([-1.0, 1.0], repeat=n)
    )
    assert res.objective == pytest.approx(best, rel=1e-12, abs=1e-15)
    assert res.ground_truth_F == pytest.approx(np.dot(y, scores) / (2 * n), rel=1e-12)
    assert res.objective - res.ground_truth_F == pytest.approx(hinge_loss(y, scores), rel=1e-9, abs=1e-12)
    assert res.objective == pytest.approx(res.loss + res.coef @ scores, rel=1e-12, abs=1e-15)
    assert res.neg_rank is None


def _rank_sum_in_child(scores, labels, queue):
    queue.put(int(lai(scores, labels, "ap").neg_rank.sum()))


def test_threaded_default_works_in_a_forked_child():
    """The default's thread pool, started in the parent, must not be reused by a forked child
    (its threads do not exist there: the call would wait forever)."""
    import multiprocessing

    from qs.inference.bucket import THREADED_MIN

    rng = np.random.default_rng(3)
    scores = rng.normal(size=THREADED_MIN + 1000)
    labels = rng.random(scores.size) < 0.01
    expected = int(lai(scores, labels, "ap").neg_rank.sum())  # starts the parent's pool
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_rank_sum_in_child, args=(scores, labels, queue))
    child.start()
    child.join(60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and queue.get(timeout=5) == expected


@pytest.mark.parametrize("loss,method", [("ap", "qs"), ("ndcg", "qs"), ("ap", "auto"),
                                         ("ndcg", "auto"), ("ap", "bucket_sort"),
                                         ("ndcg", "bucket_sort"), ("01", "zero_one")])
def test_a_workspace_loop_allocates_no_array_and_gives_identical_results(loss, method):
    """A loop of calls with one workspace: the same results as fresh calls, and (past the
    first call) no allocation of the size of the input (tracemalloc sees numpy's and numba's
    arrays); without the workspace the same loop allocates several input-sized arrays."""
    import tracemalloc

    rng = np.random.default_rng(11)
    n = 20000
    labels = rng.random(n) < 0.05
    # shaped as inside training (most negatives below every positive), where auto runs qs
    inputs = [rng.normal(size=n) + 3.0 * labels * k for k in range(1, 5)]
    ws = Workspace()
    lai(inputs[0], labels, loss, method, workspace=ws)  # sizes the workspace

    def peak(**kwargs):
        tracemalloc.start()
        for scores in inputs:
            lai(scores, labels, loss, method, **kwargs)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top

    assert peak(workspace=ws) < 8 * n / 4  # below a quarter of one float64 input-sized array
    assert peak() > 8 * n  # the test can fail: fresh outputs are at least that
    for scores in inputs:
        fresh = lai(scores, labels, loss, method)
        res = lai(scores, labels, loss, method, workspace=ws)
        np.testing.assert_array_equal(res.coef, fresh.coef)
        if loss != "01":
            np.testing.assert_array_equal(res.neg_rank, fresh.neg_rank)
        assert (res.loss, res.objective, res.ground_truth_F) == (
            fresh.loss, fresh.objective, fresh.ground_truth_F)


@pytest.mark.parametrize("method", ["qs", "bucket_sort", "auto"])
def test_a_workspace_loop_gives_fresh_results_whatever_the_last_order_of_positives(method):
    """The methods sort the positives from the order a workspace kept of the previous call:
    the result must not depend on it, when the order barely changes (training), changes
    wholly, holds ties, or comes from a call with other sizes (not a permutation then)."""
    rng = np.random.default_rng(5)
    ws = Workspace()
    base = rng.normal(size=600)
    for step in range(12):
        n = 600 if step % 4 else 450  # other sizes every fourth call
        labels = np.arange(n) % (7 if step % 3 else 5) == 0
        if step % 2:
            scores = base[:n] + 0.01 * rng.normal(size=n) + 2.0 * labels  # small changes
        else:
            scores = rng.integers(0, 4, n).astype(float) if step % 5 == 0 else rng.normal(size=n)
        fresh = lai(scores, labels, "ap", method)
        res = lai(scores, labels, "ap", method, workspace=ws)
        np.testing.assert_array_equal(res.neg_rank, fresh.neg_rank)
        np.testing.assert_array_equal(res.coef, fresh.coef)
        ref = lai(scores, labels, "ap", "sort_dc")
        np.testing.assert_array_equal(res.coef, ref.coef)


def test_a_workspace_grows_and_refuses_its_own_arrays_as_input():
    ws = Workspace()
    rng = np.random.default_rng(2)
    for n in (50, 400, 120):  # grows, then serves a smaller call from the larger arrays
        scores, labels = rng.normal(size=n), np.arange(n) % 5 == 0
        res = lai(scores, labels, "ap", "qs", workspace=ws)
        assert res.coef.shape == (n,) and res.neg_rank.shape == (n - labels.sum(),)
        np.testing.assert_array_equal(res.coef, lai(scores, labels, "ap", "qs").coef)
    with pytest.raises(ValueError, match="must not be arrays of the workspace"):
        lai(res.coef, labels, "ap", "qs", workspace=ws)
    with pytest.raises(ValueError, match="must not be arrays of the workspace"):
        lai(res.coef[10:60], labels[10:60], "ap", workspace=ws)  # a view of one
    with pytest.raises(ValueError, match="workspace must be None or a qs.inference.Workspace"):
        lai(scores, labels, workspace={})


def test_one_workspace_serves_methods_in_turn():
    """qs and auto hold their work arrays in a workspace's two shared buffers (auto's are
    longer, qs's at the same places): calls of both, and of bucket_sort, in turn on one
    workspace, with sizes that change, give the results of fresh calls."""
    rng = np.random.default_rng(8)
    ws = Workspace()
    for step in range(12):
        n = (300, 900, 500)[step % 3]
        labels = rng.random(n) < 0.1
        scores = rng.normal(size=n) + (2.0 * labels if step % 2 else 0.0)
        for method in ("auto", "qs", "bucket_sort")[step % 3:] + ("auto", "qs")[: step % 3]:
            for loss in ("ap", "ndcg"):
                fresh = lai(scores, labels, loss, method)
                res = lai(scores, labels, loss, method, workspace=ws)
                np.testing.assert_array_equal(res.neg_rank, fresh.neg_rank)
                np.testing.assert_array_equal(res.coef, fresh.coef)
                assert res.objective == fresh.objective


@pytest.mark.parametrize("n", [1, 2, 30, 31, 61, 62, 100, 3312, 100003])
def test_reference_is_the_median_of_its_strided_sample(n):
    """The reference score, found by counting, is the middle of the sorted strided sample,
    with ties and NaN among the scores too."""
    from qs.inference._core import REFERENCE_SAMPLE, reference

    rng = np.random.default_rng(n)
    for kind in ("normal", "ties", "nan"):
        x = rng.normal(size=n)
        if kind == "ties":
            x = np.round(x)
        elif kind == "nan":
            x[rng.random(n) < 0.3] = np.nan
        sample = np.sort(x[:: max(1, n // REFERENCE_SAMPLE)])
        np.testing.assert_array_equal(reference(x), sample[sample.size // 2])


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 100, 1000])
def test_sort_pairs_orders_by_descending_value_then_ascending_index(n):
    """The merge sort of the kernels against numpy's lexsort, with many ties."""
    from qs.inference._core import sort_pairs

    rng = np.random.default_rng(n)
    v = np.round(rng.normal(size=n), 1)
    idx = rng.permutation(n).astype(np.int64)
    want = np.lexsort((idx, -v))
    expect_v, expect_i = v[want], idx[want]
    sort_pairs(v, idx, np.empty(n), np.empty(n, dtype=np.int64))
    np.testing.assert_array_equal(v, expect_v)
    np.testing.assert_array_equal(idx, expect_i)


@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(-4, 4), st.integers(0, 9)), min_size=2, max_size=7)
    .filter(lambda d: 0 < sum(y < 4 for _, y in d) < len(d)),  # positives: 40% on average
    scale=st.sampled_from([1.0, 0.1, 1e-3]),
)
def test_property_many_positives_match_exhaustive_enumeration(data, scale):
    """Every method's objective against the definition (all orderings), with about as many
    positives as negatives, and ties."""
    scores = np.array([s for s, _ in data]) * scale
    labels = np.array([y < 4 for _, y in data])
    for loss, methods in RANKING.items():
        best = naive.best_objective(scores, labels, loss)
        for method in methods:
            res = lai(scores, labels, loss, method)
            assert res.objective == pytest.approx(best, rel=1e-12, abs=1e-15), method
            check_result(res, scores, labels)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
@pytest.mark.parametrize("n_pos,n_neg", [(30, 12), (40, 40), (60, 120), (100, 1000)])
def test_ranks_with_many_positives_are_each_negatives_best_rank(loss, n_pos, n_neg):
    """The default's and bucket_sort's ranks (AP's sweep past place P among them) against
    every negative's own best rank, found by trying them all."""
    rng = np.random.default_rng(n_pos + n_neg)
    scores = rng.normal(size=n_pos + n_neg)
    labels = rng.permutation(np.r_[np.ones(n_pos, bool), np.zeros(n_neg, bool)])
    want = per_negative_best_ranks(get_loss(loss), scores, labels)
    by_score = np.argsort(-scores[~labels])
    for method in ("auto", "bucket_sort"):
        res = lai(scores, labels, loss, method)
        np.testing.assert_array_equal(res.neg_rank[by_score], want, err_msg=method)


@pytest.mark.parametrize("n", [257, 1000, 70_000, 300_000])
@pytest.mark.parametrize("ties", [False, True])
def test_many_positives_are_sorted_by_buckets_as_by_lexsort(n, ties):
    """sort_positives and sort_positives_hinted above POSITIVES_BY_BUCKETS (by buckets) give
    numpy's lexsort order: descending score, ties by input index."""
    from qs.inference._core import POSITIVES_BY_BUCKETS, sort_positives, sort_positives_hinted

    assert n > POSITIVES_BY_BUCKETS
    rng = np.random.default_rng(n)
    v = rng.integers(0, 30, n).astype(float) if ties else rng.standard_cauchy(n)
    idx = np.sort(rng.choice(10 * n, n, replace=False)).astype(np.int64)  # input order
    want = np.lexsort((idx, -v))
    got_v, got_i = sort_positives(v, idx)
    np.testing.assert_array_equal(got_v, v[want])
    np.testing.assert_array_equal(got_i, idx[want])
    values, index = v.copy(), idx.copy()
    order = np.full(n, -1, dtype=np.int64)  # no hint: not a permutation
    sort_positives_hinted(values, index, order, np.empty(n), np.empty(n, dtype=np.int64),
                          np.empty(16, dtype=np.int64))
    np.testing.assert_array_equal(values, v[want])
    np.testing.assert_array_equal(index, idx[want])
    np.testing.assert_array_equal(order, want)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_capped_rank_search_finds_the_full_searchs_rank(loss):
    """best_rank_capped (which stops at the first positive not above the negative) against
    best_rank over the whole interval, on every interval of small rank sets whose scores
    tie the negative's, and on wide intervals (where the cut is taken)."""
    from qs.inference._core import CAP_MIN, best_rank, best_rank_capped, positive_steps
    from qs.losses import AP_CODE, NDCG_CODE

    code = {"ap": AP_CODE, "ndcg": NDCG_CODE}[loss]
    rng = np.random.default_rng(7)
    cut = 0
    for n_pos, n_neg in [(6, 5), (3 * CAP_MIN, 40), (600, 2000)]:
        params = get_loss(loss).prepare(n_pos, n_neg)
        pos = np.sort(np.round(rng.normal(size=n_pos), 1))[::-1]  # ties among them
        c2 = 2.0 / (n_pos * n_neg)
        spos = positive_steps(pos, c2, 0.1)
        for s in np.r_[pos[:: max(1, n_pos // 12)], rng.normal(size=12)]:  # ties with a positive
            for j in (1, 2, n_neg // 2, n_neg):
                bounds = ([(lo, hi) for lo in range(1, n_pos + 2) for hi in range(lo, n_pos + 2)]
                          if n_pos < 10 else [(1, n_pos + 1), (2, n_pos), (n_pos // 3, n_pos + 1)])
                for lo, hi in bounds:
                    want = best_rank(code, params, n_pos, c2, spos, s, j, lo, hi)
                    got = best_rank_capped(code, params, n_pos, c2, spos, s, j, lo, hi)
                    assert got == want, (n_pos, s, j, lo, hi)
                    above = 1 + np.count_nonzero(spos[1:] - c2 * (s - 0.1) > 0.0)
                    cut += hi - lo > CAP_MIN and lo < above < hi
    assert cut > 0  # the cut was taken, not only skipped


def test_score_cap_is_the_first_rank_whose_positive_is_not_above():
    """score_cap against a linear search, from every start, with ties."""
    from qs.inference._core import score_cap

    spos = np.r_[0.0, np.repeat([5.0, 3.0, 3.0, 1.0, 0.0, -2.0], [1, 2, 30, 50, 3, 60])]
    n_pos = spos.size - 1
    for cs in (6.0, 5.0, 3.0, 2.0, 0.0, -1.0, -3.0):
        first = 1 + np.count_nonzero(spos[1:] - cs > 0.0)
        for lo in range(1, n_pos + 2):
            for hi in (lo, lo + 1, min(n_pos + 1, lo + 70), n_pos + 1):
                hi = max(hi, lo)
                want = hi if hi - lo < 2 or first >= hi else max(first, lo)
                assert score_cap(spos, cs, lo, hi) == want, (cs, lo, hi)


@pytest.mark.parametrize("n", [100, 5000])
def test_a_stale_hint_still_sorts_the_positives(n):
    """sort_positives_hinted from the order of other scores (a previous call's, of the same
    size: given up early) and from the right order (kept) gives lexsort's order."""
    from qs.inference._core import sort_positives_hinted

    rng = np.random.default_rng(n)
    idx = np.sort(rng.choice(3 * n, n, replace=False)).astype(np.int64)
    order = np.full(n, -1, dtype=np.int64)
    for v in (rng.normal(size=n), np.round(rng.normal(size=n), 1), None):
        v = v if v is not None else values[np.argsort(order)] + 0.0  # the same scores again
        want = np.lexsort((idx, -v))
        values, index = v.copy(), idx.copy()
        sort_positives_hinted(values, index, order, np.empty(n), np.empty(n, dtype=np.int64),
                              np.empty(16, dtype=np.int64))
        np.testing.assert_array_equal(values, v[want])
        np.testing.assert_array_equal(index, idx[want])
        np.testing.assert_array_equal(order, want)
