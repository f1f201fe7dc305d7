"""The rank evaluations of Algorithm 1 (qs.inference._ranks): the capped search finds the rank
of the full one."""

import numpy as np
import pytest

from qs.inference._ranks import (
    CAP_MIN,
    CAPPED_BLOCK,
    ap_non_negative,
    best_rank,
    best_rank_capped,
    capped_concave_place,
    opt_ranks_swept,
    positive_steps,
    score_cap,
)
from qs.losses import AP_CODE, NDCG_CODE, get_loss


@pytest.mark.parametrize("loss", ["ap", "ndcg"])
def test_capped_rank_search_finds_the_full_searchs_rank(loss):
    """best_rank_capped (which stops at the first positive not above the negative) against
    best_rank over the whole interval, on every interval of small rank sets whose scores
    tie the negative's, and on wide intervals (where the cut is taken)."""
    code = {"ap": AP_CODE, "ndcg": NDCG_CODE}[loss]
    rng = np.random.default_rng(7)
    cut = 0
    for n_pos, n_neg in [(6, 5), (3 * CAP_MIN, 40), (600, 2000)]:
        params = get_loss(loss).prepare(n_pos, n_neg)
        pos = np.sort(np.round(rng.normal(size=n_pos), 1))[::-1]  # ties among them
        c2, spos = positive_steps(pos, n_neg, 0.1)
        assert c2 == 2.0 / (n_pos * n_neg)
        for s in np.r_[pos[:: max(1, n_pos // 12)], rng.normal(size=12)]:  # ties with a positive
            for j in (1, 2, n_neg // 2, n_neg):
                bounds = (
                    [(lo, hi) for lo in range(1, n_pos + 2) for hi in range(lo, n_pos + 2)]
                    if n_pos < 10
                    else [(1, n_pos + 1), (2, n_pos), (n_pos // 3, n_pos + 1)]
                )
                for lo, hi in bounds:
                    want = best_rank(code, params, n_pos, c2, spos, s, j, lo, hi)
                    got = best_rank_capped(code, params, n_pos, c2, spos, s, j, lo, hi)
                    assert got == want, (n_pos, s, j, lo, hi)
                    above = 1 + np.count_nonzero(spos[1:] - c2 * (s - 0.1) > 0.0)
                    cut += hi - lo > CAP_MIN and lo < above < hi
    assert cut > 0  # the cut was taken, not only skipped


def test_score_cap_is_the_first_rank_whose_positive_is_not_above():
    """score_cap against a linear search, from every start, with ties."""
    spos = np.r_[0.0, np.repeat([5.0, 3.0, 3.0, 1.0, 0.0, -2.0], [1, 2, 30, 50, 3, 60])]
    n_pos = spos.size - 1
    for cs in (6.0, 5.0, 3.0, 2.0, 0.0, -1.0, -3.0):
        first = 1 + np.count_nonzero(spos[1:] - cs > 0.0)
        for lo in range(1, n_pos + 2):
            for hi in (lo, lo + 1, min(n_pos + 1, lo + 70), n_pos + 1):
                hi = max(hi, lo)
                want = hi if hi - lo < 2 or first >= hi else max(first, lo)
                assert score_cap(spos, cs, lo, hi) == want, (cs, lo, hi)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("n_pos, n_neg", [(30, 100), (100, 100), (300, 100), (2000, 6000)])
def test_ap_sweep_from_the_capped_place_gives_each_negatives_best_rank(n_pos, n_neg, ties):
    """opt_ranks_swept with AP, which sweeps from `capped_concave_place` (before P where
    the negatives' score caps allow), against each negative's `best_rank` over all ranks;
    positives shifted up, so that the top negatives have more positives above them than
    their place (the places the sweep must not take) and the others fewer."""
    rng = np.random.default_rng(n_pos + n_neg + ties)
    params = get_loss("ap").prepare(n_pos, n_neg)
    extended = 0
    for shift in (-5.0, 0.0, 0.5, 1.0, 3.0):  # -5: most positives below the negatives
        pos, neg = rng.normal(size=n_pos) + shift, rng.normal(size=n_neg)
        if ties:
            pos, neg = np.round(pos, 1), np.round(neg, 1)  # ties within and across classes
        pos, neg = np.sort(pos)[::-1].copy(), np.sort(neg)[::-1].copy()
        c2, spos = positive_steps(pos, n_neg, 0.25)
        rk = np.empty(n_neg, dtype=np.int64)
        opt_ranks_swept(neg, rk, AP_CODE, params, n_pos, c2, spos)
        want = [
            best_rank(AP_CODE, params, n_pos, c2, spos, s, j + 1, 1, n_pos + 1)
            for j, s in enumerate(neg)
        ]
        np.testing.assert_array_equal(rk, want)
        j1 = capped_concave_place(neg, n_pos, n_pos, c2, spos)
        extended += j1 < min(n_pos, n_neg + 1)
        for j in range(j1 + 1, min(n_pos, n_neg) + 1):  # the places it certifies
            first_not_above = 1 + np.count_nonzero(spos[1:] - c2 * (neg[j - 1] - 0.25) > 0.0)
            assert first_not_above <= j
    assert extended > 0  # the sweep started before P


def test_capped_place_is_p_when_the_top_negatives_lie_below_many_positives():
    """Every negative below all positives (U = P + 1 > its place): nothing certified."""
    pos, neg = np.linspace(10.0, 5.0, 50), np.linspace(1.0, 0.0, 200)
    c2, spos = positive_steps(pos, neg.size, 0.0)
    assert capped_concave_place(neg, 50, 50, c2, spos) == 50
    assert capped_concave_place(neg[:20], 50, 50, c2, spos) == 50  # fewer negatives than P


def test_capped_place_is_the_last_place_below_p_with_more_positives_above_than_its_place():
    """capped_concave_place (a bisection per block of places, per place only in the blocks
    that do not pass whole) against its definition, counted for every place: random scores
    at several shifts and ties, fewer and more negatives than positives."""
    rng = np.random.default_rng(4)
    seen = set()
    for _ in range(300):
        n_pos, n_neg = rng.integers(1, 700, size=2)
        pos = rng.normal(size=n_pos) + rng.choice([-2.0, 0.0, 0.5, 1.0, 3.0])
        neg = rng.normal(size=n_neg)
        if rng.random() < 0.3:
            pos, neg = np.round(pos, 1), np.round(neg, 1)
        pos, neg = np.sort(pos)[::-1].copy(), np.sort(neg)[::-1].copy()
        c2, spos = positive_steps(pos, n_neg, 0.1)
        caps = 1 + (spos[None, 1:] - c2 * (neg[:, None] - 0.1) > 0.0).sum(axis=1)  # U per place
        top = min(n_pos, n_neg)
        failing = [j for j in range(1, top) if caps[j - 1] > j]
        if top < 2 or caps[top - 1] > top:
            want = n_pos
        else:
            want = failing[-1] if failing else 1
        got = capped_concave_place(neg, n_pos, n_pos, c2, spos)
        assert got == want, (n_pos, n_neg)
        seen.add((want == n_pos, want == 1, top - want > CAPPED_BLOCK))
    assert len(seen) >= 3  # none certified, all certified, a block passed whole


def test_ap_sign_by_product_is_the_quotients():
    """ap_non_negative (the product test of AP's sweep) against the increment's own
    expression, at score terms on either side of the quotient by one unit of rounding and
    by the margins, at 0, and at infinities and NaN."""
    rng = np.random.default_rng(9)
    decided = 0
    for _ in range(400):
        j, i = (int(x) for x in rng.integers(1, 1 << 24, size=2))
        n_pos = int(rng.integers(1, 1 << 23))
        q = i / ((j + i - 1.0) * (j + i) * n_pos)
        for a in (
            q,
            np.nextafter(q, np.inf),
            np.nextafter(q, -np.inf),
            q * (1 + 2.0**-45),
            q * (1 - 2.0**-45),
            q * (1 + 2.0**-38),
            q * (1 - 2.0**-38),
            2 * q,
            0.0,
            -0.0,
            -q,
            np.inf,
            -np.inf,
            np.nan,
        ):
            want = a + -i / ((j + i - 1.0) * (j + i) * n_pos) >= 0.0
            assert ap_non_negative(a, j, i, n_pos) == want, (a, j, i, n_pos)
            decided += abs(a * ((j + i - 1.0) * (j + i) * n_pos) / i - 1.0) > 2.0**-40
    assert decided > 0
