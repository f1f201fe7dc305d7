"""Workspaces (qs.inference.workspace): a loop of calls that reuses one allocates nothing and
gives the results of fresh calls."""

import numpy as np
import pytest

from qs.inference import Workspace, lai


@pytest.mark.parametrize(
    "loss,method",
    [
        ("ap", "qs"),
        ("ndcg", "qs"),
        ("ap", "auto"),
        ("ndcg", "auto"),
        ("ap", "bucket_sort"),
        ("ndcg", "bucket_sort"),
        ("01", "zero_one"),
    ],
)
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
            fresh.loss,
            fresh.objective,
            fresh.ground_truth_F,
        )


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
        for method in ("auto", "qs", "bucket_sort")[step % 3 :] + ("auto", "qs")[: step % 3]:
            for loss in ("ap", "ndcg"):
                fresh = lai(scores, labels, loss, method)
                res = lai(scores, labels, loss, method, workspace=ws)
                np.testing.assert_array_equal(res.neg_rank, fresh.neg_rank)
                np.testing.assert_array_equal(res.coef, fresh.coef)
                assert res.objective == fresh.objective
