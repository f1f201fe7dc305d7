"""The bucket method (qs.inference.bucket): its threaded path and its buckets' split against
the other methods."""

import numpy as np
import pytest

from qs.inference import lai
from qs.inference.bucket import _bucket_chunked
from qs.losses import get_loss


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
        hinge = get_loss(loss).value(out[4]) + out[5]  # out[5]: F(R_bar) - F(R*)
        assert hinge == pytest.approx(ref.hinge, rel=1e-12)
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

    partial, compact = [], bucket.compact

    def spy(starts, *args):
        n_live = compact(starts, *args)
        partial.append(np.any((n_live > 0) & (n_live < np.diff(starts))))
        return n_live

    monkeypatch.setattr(bucket, "compact", spy)
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
