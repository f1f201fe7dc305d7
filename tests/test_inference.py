"""LAI methods against exhaustive enumeration, against each other, and on bad input."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qs.inference import METHODS, lai
from qs.losses import NDCGLoss, QSLoss, get_loss
from tests import naive

RANKING = {
    "ap": ["qs", "yue", "search", "sort_dc", "bucket", "bucket_sort", "auto"],
    "ndcg": ["qs", "chakrabarti", "sort_dc", "bucket", "bucket_sort", "auto"],
}
CASES = [(loss, m) for loss, ms in RANKING.items() for m in ms]


def check_result(res, scores, labels):
    """Invariants every ranking LAI result satisfies."""
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = labels.sum(), (~labels).sum()
    # summation error grows with the magnitude of the terms, not of their (cancelling) sum
    scale = np.abs(res.coef * scores).sum()
    assert res.objective == pytest.approx(
        res.loss + res.coef @ scores, rel=1e-12, abs=1e-11 * scale
    )
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
    yield (
        "separated",
        np.r_[rng.normal(1, 1, 500), rng.normal(0, 1, n)],
        np.r_[np.ones(500), np.zeros(n)],
    )
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
        yield (
            f"{share:g} positives, ties",
            rng.integers(0, 40, many).astype(float),
            rng.random(many) < share,
        )
    yield "more positives than negatives", rng.normal(size=many), rng.random(many) < 0.7


@pytest.mark.parametrize(
    "name,scores,labels", list(large_inputs()), ids=lambda x: x if isinstance(x, str) else ""
)
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
    f = sum(
        (1 if r > k else -1) * (x - y) for k, x in enumerate(pos, 1) for y, r in zip(neg, neg_rank)
    ) / (n_pos * n_neg)
    return loss + f


def test_exact_rational_ties_are_decided_in_floating_point():
    """The documented tie rule: the largest maximiser of each negative's objective *as
    evaluated in floating point*. Negative -0.75 (place 4) gains exactly 0 in rational
    arithmetic by moving below the positive -0.625 (2 * 0.125 / 5 - 1/20), so ranks 1 and 2
    tie; the rounded step is negative and every method keeps rank 1. The ranking is still an
    exact optimum."""
    scores = np.array([0.125, -0.625, -0.25, -0.75, -1.0, 0.25])
    labels = np.array([0, 1, 0, 0, 0, 0])
    best = max(exact_ap_objective(scores, labels, r) for r in itertools.product([1, 2], repeat=5))
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
    (
        dict(scores=np.zeros(10**5 + 1), labels=np.arange(10**5 + 1) > 0, method="brute"),
        r"refuses more than 1e\+07 values",
    ),
    (dict(scores=[0.1, 0.2], labels=[1, 0], loss=QSLoss()), "QSLoss.. has no increment kernel"),
    (
        dict(
            scores=[0.1, 0.2],
            labels=[1, 0],
            loss=type("NoValue", (QSLoss,), {"kernel": staticmethod(get_loss("ap").kernel)})(),
        ),
        r"does not define value\(n_above\)",
    ),
]


@pytest.mark.parametrize(
    "encode",
    [
        lambda y: y,
        lambda y: y.astype(np.uint8),
        lambda y: y.astype(np.int8),
        lambda y: np.where(y, 1, -1).astype(np.int8),
        lambda y: np.where(y, 1.0, -1.0),
        lambda y: np.where(y, 1, 0)[::-1].copy()[::-1],  # a non-contiguous view
        lambda y: y.astype(">i8"),
        lambda y: np.where(y, 1.0, -1.0).astype(">f4"),
        lambda y: y.astype(np.float16),  # types numba cannot take: converted
    ],
    ids=[
        "bool",
        "uint8",
        "int8",
        "int8 +-1",
        "float +-1",
        "strided",
        "big-endian int",
        "big-endian float",
        "float16",
    ],
)
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


@pytest.mark.parametrize(
    "loss,method", [("ap", "auto"), ("ndcg", "bucket"), ("ap", "qs"), ("01", "zero_one")]
)
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
        assert (res.loss, res.objective, res.ground_truth_F) == (
            ref.loss,
            ref.objective,
            ref.ground_truth_F,
        )


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


@pytest.mark.parametrize(
    "labels",
    [
        [1, 0, 2],
        np.array([1, 0, 2], np.int8),
        np.array([1, 255, 0], np.uint8),
        [1.0, np.nan, 0.0],
        [1.0, 0.5, 0.0],
        [1, -2, 0],
    ],
)
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


@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(-4, 4), st.integers(0, 9)), min_size=2, max_size=7).filter(
        lambda d: 0 < sum(y < 4 for _, y in d) < len(d)
    ),  # positives: 40% on average
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
