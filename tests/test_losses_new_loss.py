"""The recipe of docs/architecture.md, "Where to add a loss", exercised: a third QS-suitable
loss, defined here, passes through `lai`, `lai_batch` and `qs.torch`'s hinge with no edit of
the library, and each finds the optimum that exhaustive enumeration finds (tests/naive.py)."""

import numba
import numpy as np
import pytest

from qs.inference import METHODS, lai
from qs.inference.batch import lai_batch
from qs.losses import QSLoss
from tests import naive


@numba.njit
def _harmonic_increment(j, i, n_pos, params):
    return params[i + j - 1]


class HarmonicLoss(QSLoss):
    """1 - DCG with the discount ``D(k) = 1/k`` (a reciprocal-rank gain for every positive),
    over the ideal DCG ``C = sum_{k<=P} 1/k``: ``Delta = (1/C) sum_k [D(k) - D(k + n_k)]``,
    ``n_k`` negatives above the k-th positive.

    QS-suitable. Decomposed over negatives: ``D(k) - D(k + n_k)`` telescopes into
    ``sum_{t=1..n_k} [D(k+t-1) - D(k+t)]``, and the t-th negative above positive k is the
    negative at place t among the negatives, above k exactly when its rank (1 + positives
    above it) is at most k. So ``delta_j(i) = (1/C) sum_{k=i..P} [D(k+j-1) - D(k+j)]`` and the
    increment ``delta_j(i+1) - delta_j(i) = (D(i+j) - D(i+j-1)) / C``, a function of ``i+j``
    that is non-decreasing in ``j`` because ``D`` is convex: the greedy choice per negative is
    monotone in its place, the condition of `qs.losses`. (NDCG's proof, with another convex
    discount; the kernel is this file's own, so the library knows nothing of the loss.)
    """

    name = "harmonic"
    kernel = staticmethod(_harmonic_increment)

    def prepare(self, n_pos, n_neg):
        d = 1.0 / np.arange(1.0, n_pos + n_neg + 2.0)  # D(1 .. n + 1)
        table = np.zeros(n_pos + n_neg + 1)
        table[1:] = np.diff(d) / d[:n_pos].sum()  # table[t] = (D(t+1) - D(t)) / C
        return table

    def increment(self, j, i, n_pos, n_neg):
        return self.prepare(n_pos, n_neg)[np.asarray(i) + np.asarray(j) - 1]

    def value(self, n_above):
        n = np.asarray(n_above, dtype=np.float64)
        k = np.arange(1.0, n.shape[-1] + 1.0)
        losses = (1.0 / k - 1.0 / (k + n)).sum(axis=-1) / (1.0 / k).sum()
        return float(losses) if n.ndim == 1 else losses


def harmonic_delta(in_order):
    """The loss of a ranking from its labels in ranked order, from the definition."""
    dcg = sum(1.0 / t for t, rel in enumerate(in_order, 1) if rel)
    return 1.0 - dcg / sum(1.0 / k for k in range(1, sum(in_order) + 1))


LOSS = HarmonicLoss()
#: the methods of lai that take any QS-suitable loss
ANY_LOSS = sorted(m for m, losses in METHODS.items() if "qs-suitable" in losses)


def small_problems(rng, count, n):
    """Scores with ties (a few distinct values) and labels with a positive and a negative."""
    for _ in range(count):
        scores = rng.integers(0, 3, n).astype(float) / 2
        labels = rng.random(n) < 0.4
        labels[:2] = [True, False]
        yield scores, rng.permutation(labels)


def test_the_value_is_the_definition():
    labels = [True, False, False, True, False, True]
    n_above = np.array([0, 2, 3])
    assert LOSS.value(n_above) == pytest.approx(harmonic_delta(labels), rel=1e-12)


@pytest.mark.parametrize("method", ANY_LOSS)
def test_lai_finds_the_exhaustive_optimum(method):
    rng = np.random.default_rng(3)
    for scores, labels in small_problems(rng, 12, 7):
        res = lai(scores, labels, LOSS, method)
        best = naive.best_objective(scores, labels, harmonic_delta)
        assert res.objective == pytest.approx(best, rel=1e-12, abs=1e-14)
        assert res.loss == pytest.approx(LOSS.value(_n_above(scores, labels, res)), rel=1e-12)


def _n_above(scores, labels, res):
    """The negatives above each positive in the ranking of ``res`` (positives by score, ties in
    input order; a negative of rank r lies above the positives r .. P)."""
    n_pos = int(np.count_nonzero(labels))
    counts = np.zeros(n_pos, dtype=np.int64)
    for r in res.neg_rank:
        counts[r - 1 :] += 1
    return counts


@pytest.mark.parametrize("method", ANY_LOSS)
def test_lai_batch_is_lai_row_by_row_and_optimal(method):
    """Rows of different numbers of positives (each its own prepared parameters), ties, a
    skipped row, and a lead of entries before each row."""
    rng = np.random.default_rng(5)
    problems = list(small_problems(rng, 5, 7))
    scores = np.array([s for s, _ in problems] + [np.zeros(7)])
    labels = np.array([y for _, y in problems] + [np.ones(7, dtype=bool)])
    for lead in (None, 2):
        kw = {} if lead is None else {"lead": (scores[:, :lead], labels[:, :lead])}
        rest = slice(0 if lead is None else lead, None)
        res = lai_batch(scores[:, rest], labels[:, rest], LOSS, method, gradient=True, **kw)
        assert res.valid.tolist() == [True] * 5 + [False]
        assert res.loss[5] == res.hinge[5] == 0.0 and not res.coef[5].any()
        for q in range(5):
            ref = lai(scores[q], labels[q], LOSS, method)
            truth = np.where(labels[q], 1.0 / labels[q].sum(), -1.0 / (~labels[q]).sum())
            np.testing.assert_array_equal(res.coef[q], ref.coef - truth)
            np.testing.assert_array_equal(res.rank[q][~labels[q]], ref.neg_rank)
            assert res.loss[q] == ref.loss and res.hinge[q] == ref.hinge
            assert res.objective[q] == pytest.approx(
                naive.best_objective(scores[q], labels[q], harmonic_delta), rel=1e-12, abs=1e-14
            )


def test_the_torch_hinge_takes_the_loss():
    torch = pytest.importorskip("torch")
    from qs.torch import rank_hinge_loss

    rng = np.random.default_rng(9)
    problems = list(small_problems(rng, 4, 6))
    scores = torch.tensor(np.array([s for s, _ in problems]), requires_grad=True)
    labels = torch.tensor(np.array([y for _, y in problems]))
    values = rank_hinge_loss(scores, labels, LOSS, reduction="none", dim=-1)
    values.sum().backward()
    ref = lai_batch(scores.detach().numpy(), labels.numpy(), LOSS, gradient=True)
    for q, (s, y) in enumerate(problems):
        truth = s[y].mean() - s[~y].mean()
        best = naive.best_objective(s, y, harmonic_delta)
        assert values[q].item() == pytest.approx(best - truth, rel=1e-12, abs=1e-14)
    np.testing.assert_array_equal(scores.grad.numpy(), ref.coef)
    with pytest.raises(ValueError, match="method 'torch' takes loss in"):
        rank_hinge_loss(scores, labels, LOSS, method="torch", dim=-1)
