"""The default method's choice (qs.inference.auto): what it reads of the input, and that
every branch gives the exact result."""

import numpy as np
import pytest

from qs.inference import lai
from qs.inference._packed_sort import pack_descending, packed_sort, place_bits, unpack_sorted
from qs.inference.auto import (
    BUCKET_MAX_POSITIVES,
    SETTLED_SHARE,
    SHARE_SAMPLE,
    SORT_BELOW,
    SORT_PER_POSITIVE,
    settled_share,
    sorts,
)


def inputs(n_pos, n_neg, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.r_[np.ones(n_pos, np.uint8), np.zeros(n_neg, np.uint8)])
    return rng.standard_normal(n_pos + n_neg), labels


def share(scores, labels):
    """The share auto's kernel reads: of the negatives, at or below the lowest positive."""
    return settled_share(scores[labels == 0], scores[labels == 1].min())


def test_settled_share_reads_ties_training_and_random_scores():
    scores, labels = inputs(300, 3000)
    trained = np.where(labels == 1, scores + 10.0, scores)  # every negative below the positives
    assert share(np.zeros_like(scores), labels) == 1.0  # all tie: the first iteration
    assert share(trained, labels) == 1.0
    assert share(scores, labels) < 0.05  # random: the lowest positive is far down
    half = np.where(labels == 1, 0.0, np.r_[-np.ones(1650), np.ones(1650)])  # half below
    assert share(half, labels) == pytest.approx(0.5, abs=0.1)


def test_settled_share_samples_the_negatives_evenly():
    v = np.r_[np.zeros(40 * SHARE_SAMPLE), np.ones(10 * SHARE_SAMPLE)]  # the last fifth above
    assert settled_share(v, 0.0) == pytest.approx(0.8, abs=1.0 / SHARE_SAMPLE)  # one sample
    assert settled_share(v[:7], 0.0) == 1.0  # fewer than the sample: all of them


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
@pytest.mark.parametrize("kind", ["random", "ties", "trained", "most_below", "large"])
def test_every_branch_is_exact(loss, kind):
    n_neg = 2 * SORT_BELOW if kind == "large" else 3000
    scores, labels = inputs(200, n_neg, seed=1)
    if kind == "ties":
        scores[:] = 0.0
    elif kind == "trained":
        scores = np.where(labels == 1, scores + 2.0, scores - 2.0)
    elif kind == "most_below":  # 60% of the negatives below every positive, the rest spread
        scores = np.where((labels == 0) & (np.arange(scores.size) % 5 < 3), -10.0, scores)
    settled = kind in ("ties", "trained", "most_below")
    assert (share(scores, labels) >= SETTLED_SHARE) == settled or kind == "large"
    ours = lai(scores, labels, loss, "auto")
    ref = lai(scores, labels, loss, "sort_dc")
    np.testing.assert_array_equal(ours.neg_rank, ref.neg_rank)
    np.testing.assert_array_equal(ours.coef, ref.coef)
    assert ours.objective == pytest.approx(ref.objective, rel=1e-12)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_ties_keep_input_order_on_the_sorting_branch(loss):
    """Spread scores with many ties go to bucket_sort after the pass that split the
    negatives around a pivot; tied negatives that straddle a rank change must still take
    their ranks in input order."""
    rng = np.random.default_rng(0)
    tried = 0
    while tried < 12:
        n_neg, n_pos, k = rng.integers(20, 300), rng.integers(2, 40), rng.integers(2, 8)
        labels = rng.permutation(np.r_[np.ones(n_pos, np.uint8), np.zeros(n_neg, np.uint8)])
        scale = rng.choice([0.001, 0.01, 0.1, 1.0])  # small steps: ties straddle rank changes
        scores = rng.integers(-k, k + 1, labels.size) * scale
        if share(scores, labels) >= SETTLED_SHARE:
            continue
        tried += 1
        ours = lai(scores, labels, loss, "auto")
        for method in ("sort_dc", "bucket_sort", "qs"):
            ref = lai(scores, labels, loss, method)
            np.testing.assert_array_equal(ours.neg_rank, ref.neg_rank)
            np.testing.assert_array_equal(ours.coef, ref.coef)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
@pytest.mark.parametrize("n_pos", [1, 5, 46, 47, 300])
def test_few_and_many_positives_among_few_negatives_are_exact(loss, n_pos):
    """Both sides of QS_PER_POSITIVE (3000 negatives: qs up to 46 positives, bucket_sort from
    47), random scores and ties."""
    from qs.inference.auto import QS_PER_POSITIVE

    assert (QS_PER_POSITIVE * n_pos <= 3000) == (n_pos <= 46)
    scores, labels = inputs(n_pos, 3000, seed=n_pos)
    for s in (scores, np.round(scores)):
        ours = lai(s, labels, loss, "auto")
        ref = lai(s, labels, loss, "sort_dc")
        np.testing.assert_array_equal(ours.neg_rank, ref.neg_rank)
        np.testing.assert_array_equal(ours.coef, ref.coef)
        assert ours.objective == pytest.approx(ref.objective, rel=1e-12)


def test_the_size_rule_reads_the_share_and_the_number_of_positives():
    """bucket for many negatives per positive unless the positives outnumber half its
    buckets; sorting otherwise."""
    assert sorts(SORT_BELOW - 1, 1)
    assert not sorts(10**6, 1000)
    assert sorts(10**6, 10**6 // SORT_PER_POSITIVE + 1)  # a share above 1/24
    assert not sorts(10**7, BUCKET_MAX_POSITIVES)
    assert sorts(10**7, BUCKET_MAX_POSITIVES + 1)  # many negatives, but too many positives


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_many_positives_among_many_negatives_agree_across_methods(loss):
    """The default where the number of positives alone makes it sort, against ``bucket``
    (which sorts nothing) and ``qs`` on a large input with ties."""
    n_pos = BUCKET_MAX_POSITIVES + 1
    scores, labels = inputs(n_pos, SORT_PER_POSITIVE * n_pos, seed=3)
    scores = np.round(scores, 3)  # ties among the negatives and across the labels
    ours = lai(scores, labels, loss, "auto")
    for method in ("bucket", "qs"):
        ref = lai(scores, labels, loss, method)
        np.testing.assert_array_equal(ours.neg_rank, ref.neg_rank, err_msg=method)
        assert ours.objective == pytest.approx(ref.objective, rel=1e-12)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_the_numpy_sort_route_is_exact_on_small_inputs(loss, monkeypatch):
    """The route that hands the sort to numpy, forced from one negative on: the same ranks,
    coefficients and hinge as ``bucket_sort`` (same tie rule), the optimum of exhaustive
    enumeration, on ties, signed zeros and subnormal steps."""
    from qs.inference import auto

    monkeypatch.setattr(auto, "NUMPY_SORT_FROM", 1)
    rng = np.random.default_rng(5)
    tried = 0
    while tried < 300:
        n = int(rng.integers(2, 11))
        labels = (rng.random(n) < 0.6).astype(np.uint8)
        if labels.all() or not labels.any():
            continue
        step = rng.choice([1.0, 0.5, 1e-320])
        scores = rng.integers(-3, 4, n) * step
        scores[rng.random(n) < 0.2] = -0.0
        tried += 1
        ours = lai(scores, labels, loss, "auto")
        ref = lai(scores, labels, loss, "bucket_sort")
        np.testing.assert_array_equal(ours.neg_rank, ref.neg_rank)
        np.testing.assert_array_equal(ours.coef, ref.coef)
        assert ours.hinge == ref.hinge
        assert ours.hinge == pytest.approx(lai(scores, labels, loss, "brute").hinge, abs=1e-12)


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
@pytest.mark.parametrize("kind", ["random", "ties", "low_bits", "zeros"])
def test_the_numpy_sort_route_runs_from_its_size_and_agrees(loss, kind, monkeypatch):
    """From NUMPY_SORT_FROM negatives at a share of positives that sorts, the default packs
    the negatives and the positives for numpy's sort (counted), and agrees with ``bucket_sort`` to the bit:
    random scores, many ties, scores that differ only in their lowest bits (long runs of
    equal packed keys, out of order), and signed zeros among tiny scores."""
    from qs.inference import auto

    packed = []
    monkeypatch.setattr(auto, "packed_sort", lambda v: packed.append(1) or packed_sort(v))
    n_neg = auto.NUMPY_SORT_FROM + 17
    scores, labels = inputs(n_neg // 4, n_neg, seed=7)
    rng = np.random.default_rng(7)
    if kind == "ties":
        scores = np.round(scores * 3)
    elif kind == "low_bits":
        scores = 1.0 + rng.integers(0, 1 << 20, scores.size) * 2.0**-52
    elif kind == "zeros":
        scores = rng.choice([0.0, -0.0, 1e-300, -1e-300, 2.0], scores.size)
    ours = lai(scores, labels, loss, "auto")
    ref = lai(scores, labels, loss, "bucket_sort")
    np.testing.assert_array_equal(ours.neg_rank, ref.neg_rank)
    np.testing.assert_array_equal(ours.coef, ref.coef)
    assert ours.hinge == ref.hinge
    assert packed == [1, 1] or share(scores, labels) >= SETTLED_SHARE


def test_packed_keys_sort_by_descending_score_then_place():
    """np.sort of the packed keys, then the runs fixed, gives np.lexsort's order of
    (descending score, ascending place), for runs longer and shorter than SHORT_RUN."""
    rng = np.random.default_rng(2)
    for v in (
        rng.normal(size=5000),
        1.0 + rng.integers(0, 1 << 20, 5000) * 2.0**-52,  # one long run, scrambled
        1.0 + rng.integers(0, 1 << 16, 5000) * 2.0**-44,  # runs of a few scores each
        rng.choice([0.0, -0.0, -1.0, np.inf, -np.inf], 5000),
    ):
        n = v.size
        keys = np.empty(n, dtype=np.uint64)
        pack_descending(v.view(np.uint64), place_bits(n), keys)
        keys.sort()
        key = np.arange(n, dtype=np.int64)
        v_sorted, key_sorted = np.empty(n), np.empty(n, dtype=np.int64)
        unpack_sorted(keys, place_bits(n), v, key, v_sorted, key_sorted)
        np.testing.assert_array_equal(key_sorted, np.lexsort((key, -(v + 0.0))))
        np.testing.assert_array_equal(v_sorted, v[key_sorted])


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_the_numpy_sort_route_leaves_the_positives_order_for_the_next_calls_hint(loss):
    """The positives sorted by numpy leave in the workspace the arrangement that the
    kernel's own sort leaves (sort_positives_hinted): the gathered places of the positives
    by descending score, ties in input order; a call that sorts them from that hint (the
    ``qs`` route) gives the same result as without a workspace."""
    from qs.inference import Workspace, auto

    n_neg = auto.NUMPY_SORT_FROM + 5
    scores, labels = inputs(n_neg // 3, n_neg, seed=3)
    scores = np.round(scores, 2)  # ties among the positives
    assert share(scores, labels) < SETTLED_SHARE
    n_pos = int(labels.sum())
    ws = Workspace()
    first = lai(scores, labels, loss, "auto", workspace=ws)
    np.testing.assert_array_equal(first.neg_rank, lai(scores, labels, loss, "bucket_sort").neg_rank)
    _, ints = ws.arrays(auto.PACKED, n_neg, n_pos)
    order = ints[3 * n_neg + n_pos : 3 * n_neg + 2 * n_pos]
    pos = scores[labels == 1]
    np.testing.assert_array_equal(order, np.lexsort((np.arange(n_pos), -pos)))
    again = lai(scores, labels, loss, "qs", workspace=ws)  # sorts from the hint
    np.testing.assert_array_equal(again.neg_rank, lai(scores, labels, loss, "qs").neg_rank)
